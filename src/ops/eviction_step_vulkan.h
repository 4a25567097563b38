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

// Whether decode_merge_scores can score this step in the merge's dispatch: a decode step
// (one query, evicting one or none) under a rule that reads the step's scores given as logits
// (H2O's, TreeKV's), for groups of up to 8 query heads. It then leaves candidates for the
// victim, from which evict_one (a thread a slot) evicts.
bool scores_in_merge(const EvictionShape& shape, const EvictionArgs& args);

// Whether the eviction kernels make this step with a merge's dispatch: a decode step's single
// eviction under STREAMING's rule (evict_one beside the merge's workgroups), and past 4096 slots
// (or as KVC_SCORED_EVICTION says) a step scores_in_merge takes. Any other step takes
// eviction_step, one workgroup per kv head.
bool eviction_merges(const EvictionShape& shape, const EvictionArgs& args);

// Records the step's dispatches; with `merge`, the merge's among them (eviction_merges must hold).
void record_eviction(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings* merge);

// Bytes of the candidates decode_merge_scores leaves for a step of `shape`.
size_t eviction_candidates_bytes(const EvictionShape& shape);
// Records the merge and the scoring of a step scores_in_merge takes, its candidates into `candidates`.
void record_merge_scores(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings& merge,
                         View candidates);
// Records the single evictions whose candidates the steps' scoring left, like layers (the same
// kernel and push constants: in an engine's step, every layer) in one dispatch.
void record_deferred_evictions(Backend& backend, const std::vector<DeferredEviction>& evictions);

}  // namespace kvc::ops
