// A token stream driven through ops::eviction_step alone, as the eviction policies drive it
// (append one token into the first free slot with its rank as position, then one step), on
// any backend. Each token's K and V rows carry its index, so the kept tokens can be read back.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ops/decode_evict.h"
#include "ops/eviction_step.h"

namespace kvc::test {

// The op's settings for a stream: `window` is ignored by Oldest (StreamingLLM keeps c - sinks).
ops::EvictionShape eviction_stream_shape(ops::EvictionRule rule, uint32_t capacity, uint32_t sinks, uint32_t window,
                                         uint32_t num_kv_heads, uint32_t head_dim, Dtype dtype);

struct EvictionStream {
  EvictionStream(Backend& backend, const ops::EvictionShape& settings, uint32_t capacity);

  // Records appending the next `count` tokens (a chunk when > 1, whose queries are all
  // counted) and one step whose attention scores are `scores` (f32 [num_kv_heads][slots held
  // after the append], by physical slot; unused by Oldest).
  void record_tokens(View scores, uint32_t count = 1);
  // Records appending the next token and one step fed a decode query's logits (f32
  // [num_kv_heads][slots held after the append][group], attention.h's layout) and log-sum-exps
  // (f32 [num_q_heads]).
  void record_token_logits(View logits, View lse);
  // How record_token_decode records its step.
  enum class DecodeRoute {
    TwoOps,    // ops::attention, then ops::eviction_step
    Fused,     // ops::decode_evict
    Deferred,  // ops::decode_evict_deferring, its eviction returned for ops::evict_deferred
  };
  // Records appending the next token and a decode step over the slots held with `q`
  // ([num_q_heads][head_dim], the stream's dtype; settings.num_q_heads set) into `out`, by
  // `route`; the rules that read scores take the decode's logits and log-sum-exps (as the
  // eviction policies do). Returns what the deferred route left: the scoring, and the eviction if any.
  std::optional<ops::DeferredEviction> record_token_decode(View q, View out, DecodeRoute route);
  // Kept token indices per kv head, by rank; checks that every V row matches its K row.
  std::vector<std::vector<uint32_t>> kept_tokens();
  // Positions, S and C as bytes, for bitwise comparisons between backends.
  std::vector<unsigned char> state_bytes();

  Backend& backend;
  ops::EvictionShape shape;  // slots_held: slots after the last recorded step
  uint32_t capacity;
  uint32_t tokens = 0;
  std::unique_ptr<Tensor> k, v, positions, sums, counts;
  std::unique_ptr<Tensor> logits, lse;  // record_token_decode's, for the rules that read scores (with num_q_heads)
  std::unique_ptr<Tensor> candidates;   // its deferred route's

 private:
  void append_tokens(uint32_t count);
  // The step after appending `count` tokens; shape.slots_held and tree_first move past it.
  ops::EvictionShape next_step(uint32_t count);
  void record_step(uint32_t count, View scores, View logits, View lse);
};

// Algorithm 1 of TreeKV (and the baselines' rules) written from the papers on a list of token
// indices in rank order, per kv head, in double; independent of the op's physical slots.
struct EvictionByFormula {
  EvictionByFormula(const ops::EvictionShape& settings, uint32_t capacity);
  // Appends the next token and evicts when over capacity; scores [kv][rank] of the new list.
  void add_token(const std::vector<std::vector<double>>& scores_by_rank);

  ops::EvictionShape shape;
  uint32_t capacity;
  uint32_t tokens = 0;
  uint32_t idx = 1;  // Algorithm 1's scope index, 1-based as the paper writes it
  std::vector<std::vector<uint32_t>> kept;  // per kv head, token indices by rank
  std::vector<std::vector<double>> sums;    // S per kv head, by rank
  std::vector<std::vector<double>> counts;  // C per kv head, by rank
  double min_margin = 1.0;  // smallest relative gap of any decision (near-ties are ambiguous in f32)
};

}  // namespace kvc::test
