// The eviction kernels' dispatches, shared by eviction_step_vulkan and decode_evict_vulkan, whose
// eviction may share decode attention's merge dispatch. Vulkan implementations only.
#pragma once

#include <cstdint>

#include "ops/eviction_step.h"

namespace kvc::ops {

// What decode attention's merge (shaders/include/merge_splits.glsl) reads and writes.
struct MergeBindings {
  View partials;  // attention_decode's [num_q_heads][num_splits][head_dim + 2]
  uint32_t num_splits = 0;
  View out;       // [num_q_heads][head_dim], the cache's dtype
  View lse;       // f32 [num_q_heads]
};

// Whether the eviction kernels make this step with a merge's dispatch: a decode step's single
// eviction under STREAMING's rule (evict_one beside the merge's workgroups), and a decode step
// (scoring, evicting one or none) under the rules that read the step's scores given as logits,
// for groups of up to 8 query heads over more than 4096 slots (decode_merge_scores: the merge's
// dispatch also updates the scores and leaves candidates for the victim; then evict_one, a
// thread a slot). Any other step takes eviction_step, one workgroup per kv head.
bool eviction_merges(const EvictionShape& shape, const EvictionArgs& args);

// Records the step's dispatches; with `merge`, the merge's among them (eviction_merges must hold).
void record_eviction(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings* merge);

}  // namespace kvc::ops
