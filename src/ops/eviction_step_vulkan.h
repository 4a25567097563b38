// The eviction kernels' dispatch, shared by eviction_step_vulkan and decode_evict_vulkan, whose
// eviction dispatch is also decode attention's merge. Vulkan implementations only.
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

// Whether the eviction kernels make this step in a merge's dispatch: STREAMING's single
// eviction (evict_oldest, beside the merge's workgroups). The rules that read the step's
// scores need the merge's log-sum-exps first; made by the last of a kv head's merging
// workgroups they measured no faster (docs/benchmarks.md), so they keep a dispatch of their own.
bool eviction_merges(const EvictionShape& shape);

// Records the step's dispatch; with `merge`, one that also merges (eviction_merges must hold).
void record_eviction(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings* merge);

}  // namespace kvc::ops
