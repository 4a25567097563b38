// Vulkan decode with eviction: STREAMING's single eviction in the dispatch that merges the
// decode's splits (record_eviction with a merge); a step scored from the decode's logits
// (scored_from_logits) as attention, then eviction_scores and evict_one, which a deferred step
// leaves to evict_deferred; any other step as attention, then eviction_step. Deferring is
// Vulkan's alone (can_defer_eviction).
#include "ops/decode_evict.h"
#include "ops/decode_split_vulkan.h"
#include "ops/eviction_step_vulkan.h"

namespace kvc::ops {

void decode_evict_vulkan(Backend& backend, const AttentionShape& attention, const EvictionShape& eviction,
                         const DecodeEvictArgs& args) {
  if (eviction.rule == EvictionRule::Oldest && eviction.evictions == 1) {
    const DecodeSplits splits = record_decode_splits(backend, attention, args.attention);
    const View lse = args.attention.lse ? args.attention.lse
                                        : view(backend.scratch(ScratchId::AttentionLse, size_t(attention.num_q_heads) * sizeof(float)));
    const MergeBindings merge{splits.partials, splits.num_splits, args.attention.out, lse};
    record_eviction(backend, eviction, args.eviction, &merge);
    return;
  }
  attention_vulkan(backend, attention, args.attention);
  if (!scored_from_logits(eviction, args.eviction)) {
    eviction_step_vulkan(backend, eviction, args.eviction);
    return;
  }
  const size_t bytes = deferred_candidates_bytes(eviction.rule, eviction.num_kv_heads, eviction.slots_held);
  const View candidates = view(backend.scratch(ScratchId::EvictionCandidates, bytes));
  record_scored_evictions(backend, {{eviction, args.eviction, candidates}});
}

bool can_defer_eviction(const Backend& backend, const EvictionShape& eviction, const EvictionArgs& args) {
  return !backend.is_cpu() && scored_from_logits(eviction, args);
}

DeferredEviction decode_evict_deferring(Backend& backend, const AttentionShape& attention, const EvictionShape& eviction,
                                        const DecodeEvictArgs& args, View candidates) {
  check_decode_evict(attention, eviction, args);
  const size_t bytes = deferred_candidates_bytes(eviction.rule, eviction.num_kv_heads, eviction.slots_held);
  require(can_defer_eviction(backend, eviction, args.eviction) && candidates.tensor &&
              candidates.offset + bytes <= candidates.tensor->bytes(),
          KVC_ERROR_INTERNAL, "decode_evict_deferring: a step that cannot defer, or candidates too small");
  attention_vulkan(backend, attention, args.attention);
  return {eviction, args.eviction, candidates};
}

void evict_deferred(Backend& backend, const std::vector<DeferredEviction>& evictions) {
  if (evictions.empty()) return;
  require(!backend.is_cpu(), KVC_ERROR_INTERNAL, "evict_deferred on the CPU, which never defers");
  record_scored_evictions(backend, evictions);
}

}  // namespace kvc::ops
