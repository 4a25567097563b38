// Vulkan decode with eviction: attention_decode's splits, then the merge's dispatch, which also
// evicts or scores (record_eviction with a merge) where eviction_merges says; else attention,
// then the eviction step. A deferred step (decode_evict_deferring) always scores in the merge's
// dispatch and leaves evict_one to evict_deferred. Deferring is Vulkan's alone: on the CPU
// deferred_candidates_bytes is 0, so no caller defers there.
#include <cstdlib>
#include <cstring>

#include "ops/decode_evict.h"
#include "ops/decode_split_vulkan.h"
#include "ops/eviction_step_vulkan.h"

namespace kvc::ops {
namespace {

// The merge the eviction's dispatch joins, after recording the decode's splits.
MergeBindings record_splits(Backend& backend, const AttentionShape& attention, const AttentionArgs& args) {
  const DecodeSplits splits = record_decode_splits(backend, attention, args);
  const View lse = args.lse ? args.lse : view(backend.scratch(ScratchId::AttentionLse, size_t(attention.num_q_heads) * sizeof(float)));
  return {splits.partials, splits.num_splits, args.out, lse};
}

}  // namespace

void decode_evict_vulkan(Backend& backend, const AttentionShape& attention, const EvictionShape& eviction,
                         const DecodeEvictArgs& args) {
  if (!eviction_merges(eviction, args.eviction)) {
    attention_vulkan(backend, attention, args.attention);
    eviction_step_vulkan(backend, eviction, args.eviction);
    return;
  }
  const MergeBindings merge = record_splits(backend, attention, args.attention);
  record_eviction(backend, eviction, args.eviction, &merge);
}

size_t deferred_candidates_bytes(const Backend& backend, const EvictionShape& eviction, const EvictionArgs& args) {
  // KVC_SCORED_EVICTION=workgroup keeps every step on eviction_step's route (read per call, as
  // eviction_merges reads it), so that tests and benchmarks can compare the two.
  const char* route = std::getenv("KVC_SCORED_EVICTION");
  if (backend.is_cpu() || !scores_in_merge(eviction, args) || (route && std::strcmp(route, "workgroup") == 0)) return 0;
  return eviction_candidates_bytes(eviction);
}

std::optional<DeferredEviction> decode_evict_deferring(Backend& backend, const AttentionShape& attention,
                                                       const EvictionShape& eviction, const DecodeEvictArgs& args,
                                                       View candidates) {
  check_decode_evict(attention, eviction, args);
  const size_t bytes = deferred_candidates_bytes(backend, eviction, args.eviction);
  require(bytes > 0 && candidates.tensor && candidates.offset + bytes <= candidates.tensor->bytes(), KVC_ERROR_INTERNAL,
          "decode_evict_deferring: a step that cannot defer, or candidates too small");
  const MergeBindings merge = record_splits(backend, attention, args.attention);
  record_merge_scores(backend, eviction, args.eviction, merge, candidates);
  if (eviction.evictions == 0) return std::nullopt;
  return DeferredEviction{eviction, args.eviction, candidates};
}

void evict_deferred(Backend& backend, const std::vector<DeferredEviction>& evictions) {
  require(!backend.is_cpu(), KVC_ERROR_INTERNAL, "evict_deferred on the CPU, which never defers");
  if (!evictions.empty()) record_deferred_evictions(backend, evictions);
}

}  // namespace kvc::ops
