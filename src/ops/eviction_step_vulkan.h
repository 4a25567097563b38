// The eviction kernels' dispatches, shared by eviction_step_vulkan and decode_evict_vulkan, whose
// eviction may share decode attention's merge dispatch. Vulkan implementations only.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/decode_evict.h"
#include "ops/eviction_step.h"

namespace kvc::ops {

// What decode attention's merge (shaders/include/merge_splits.glsl) reads and writes.
struct MergeBindings {
  View partials;  // attention_decode's [num_q_heads][num_splits][head_dim + 2]
  uint32_t num_splits = 0;
  View out;       // [num_q_heads][head_dim], the cache's dtype
  View lse;       // f32 [num_q_heads]
};

// Whether a decode step's eviction takes eviction_scores and evict_one: a rule that reads the
// step's attention (H2O, TOVA, TreeKV), its scores given as the decode's logits and lse, one
// query, evicting one token or none.
bool scored_from_logits(const EvictionShape& shape, const EvictionArgs& args);
// Records such steps' scoring, every layer's, then their evictions (layers alike in the
// kernels' constants, in an engine's step every layer, share each dispatch).
void record_scored_evictions(Backend& backend, const std::vector<DeferredEviction>& evictions);

// Records any other step: a decode step's single eviction under STREAMING's rule (evict_one,
// with `merge` beside the merge's workgroups), else eviction_step, one workgroup per kv head.
void record_eviction(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings* merge);

}  // namespace kvc::ops
