// One decode-time eviction step of a layer, after attention: update each slot's score from
// the step's attention, then evict `evictions` tokens, each chosen by the policy's rule among
// the ranks between the sinks and the recent window. Slots hold tokens in any physical order;
// a slot's int32 position is its token's in-cache rank (positions are re-assigned after
// eviction, TreeKV §4.1 following StreamingLLM §3.2). Evicting rank r lowers every rank above
// r by one and moves the last physical slot's token (K, V row, score, count) into the freed
// slot, so 4 bytes per slot and one row per kv head move, never the whole cache. The step's
// attention comes as per-slot probabilities, or for one query as attention's logits and
// log-sum-exps (ops/attention.h), turned into probabilities here: the decode path then needs
// no scores dispatch between attention and the step.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

enum class EvictionRule : uint32_t {
  Oldest = 0,        // StreamingLLM: the oldest token after the sinks
  Accumulated = 1,   // H2O: lowest attention summed over all later queries, per kv head
  CurrentQuery = 2,  // TOVA: lowest attention of the current queries summed over all heads
  Tree = 3,          // TreeKV Algorithm 1: the less important (S / C) of the scope {idx, idx + 1}
  TreeLeft = 4,      // TreeKV §5.4 ablation (TreeKVSelectLeftToken): always the scope's left token
};

// Whether a rule keeps a per-slot score sum S, and whether it keeps a count C (TreeKV's S / C).
inline bool rule_keeps_sums(EvictionRule rule) { return rule != EvictionRule::Oldest; }
inline bool rule_keeps_counts(EvictionRule rule) { return rule == EvictionRule::Tree || rule == EvictionRule::TreeLeft; }
struct EvictionShape {
  EvictionRule rule = EvictionRule::Oldest;
  uint32_t num_kv_heads = 0;
  uint32_t num_q_heads = 0;     // with logits: a multiple of num_kv_heads
  uint32_t head_dim = 0;        // multiple of 8
  uint32_t slot_stride = 0;
  Dtype dtype = Dtype::F32;     // of k and v
  uint32_t slots_held = 0;      // slots in use before the step (physical slots 0..slots_held-1)
  uint32_t new_slots = 0;       // slots appended since the last step: their S and C start at 0
  uint32_t num_queries = 0;     // queries of the attention whose scores are given (the newest ranks)
  uint32_t sinks = 0;           // ranks 0..sinks-1 are never evicted
  uint32_t recent_window = 0;   // the newest recent_window ranks are never evicted
  uint32_t evictions = 0;       // tokens to evict, <= slots_held - sinks - recent_window
  uint32_t tree_span = 0;       // Tree rules: m = cache size - sinks - recent_window, >= 1
  uint32_t tree_first = 0;      // Tree rules: idx - 1 of the first eviction (0-based), < tree_span
};

struct EvictionArgs {
  View k;             // [num_kv_heads][slot_stride][head_dim], before RoPE
  View v;             // [num_kv_heads][slot_stride][head_dim]
  View positions;     // int32 [num_kv_heads][slot_stride]: each slot's rank
  View scores;        // f32 [num_kv_heads][slots_held] from attention; not read by Oldest
  // Instead of scores, num_queries 1: attention's logits, f32 [num_kv_heads][slots_held][group], and
  // lse, f32 [num_q_heads]; a slot's score is the sum over the kv head's query heads of
  // exp(logit - lse), in query-head order.
  View logits;
  View lse;
  View score_sums;    // f32 [num_kv_heads][slot_stride] S; rule_keeps_sums only
  View score_counts;  // uint32 [num_kv_heads][slot_stride] C; rule_keeps_counts only
};

void eviction_step(Backend& backend, const EvictionShape& shape, const EvictionArgs& args);
void eviction_step_cpu(const EvictionShape& shape, const EvictionArgs& args);
void eviction_step_vulkan(Backend& backend, const EvictionShape& shape, const EvictionArgs& args);

}  // namespace kvc::ops
