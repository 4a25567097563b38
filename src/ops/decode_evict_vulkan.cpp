// Vulkan decode with eviction: attention_decode's splits, then the merge's dispatch, which also
// evicts or scores (record_eviction with a merge) where eviction_merges says; else attention,
// then the eviction step.
#include "ops/decode_evict.h"
#include "ops/decode_split_vulkan.h"
#include "ops/eviction_step_vulkan.h"

namespace kvc::ops {

void decode_evict_vulkan(Backend& backend, const AttentionShape& attention, const EvictionShape& eviction,
                         const DecodeEvictArgs& args) {
  if (!eviction_merges(eviction, args.eviction)) {
    attention_vulkan(backend, attention, args.attention);
    eviction_step_vulkan(backend, eviction, args.eviction);
    return;
  }
  const DecodeSplits splits = record_decode_splits(backend, attention, args.attention);
  const View lse = args.attention.lse
                       ? args.attention.lse
                       : view(backend.scratch(ScratchId::AttentionLse, size_t(attention.num_q_heads) * sizeof(float)));
  const MergeBindings merge{splits.partials, splits.num_splits, args.attention.out, lse};
  record_eviction(backend, eviction, args.eviction, &merge);
}

}  // namespace kvc::ops
