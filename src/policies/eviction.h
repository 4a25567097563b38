// Decode-time eviction at a fixed cache size c per layer, the loop shared by StreamingLLM
// (Xiao et al. 2023, §3.2), H2O (Zhang et al. 2023), TOVA (Oren et al. 2024) and
// TreeKV (He et al., §4.1, Algorithm 1): append -> attend -> update per-slot scores ->
// evict one token when over c, all on the device with no host round trip: in the attend's
// submission, or inside a step at the step's end (ops/decode_evict.h).
// The sinks and the recent window are never evicted; TreeKV's paper keeps the same layout for
// every method it compares (4 sinks + 508 recent + 512 selected at c = 1024, §5.2), and runs
// all of them far past Llama-2's 4k positions (16k contexts, a 10M-token stream, §5.2), which
// only re-assigned positions allow: so all four re-assign positions as TreeKV §4.1 and
// StreamingLLM do, each kept token's position being its in-cache rank.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ops/decode_evict.h"
#include "ops/eviction_step.h"
#include "policies/policy.h"

namespace kvc {

// The validated kvc_eviction_params, resolved per layer.
struct EvictionSettings {
  ops::EvictionRule rule = ops::EvictionRule::Oldest;
  uint32_t sinks = 4;
  uint32_t chunk_slots = 1;
  uint32_t prefill_block = 32;
  std::vector<uint32_t> capacities;      // c per layer
  std::vector<uint32_t> recent_windows;  // per layer
};

// Checks config.policy_params (kvc_eviction_params or NULL) against config; throws Error
// naming the field and its limit.
EvictionSettings validate_eviction_params(const CacheConfig& config);

class EvictionPolicy : public Policy {
 public:
  explicit EvictionPolicy(const CacheConfig& config);
  std::unique_ptr<Policy> clone() const override { return std::make_unique<EvictionPolicy>(*this); }
  uint32_t slots_allocated() const override;
  void check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const override;
  // Slots 0..held-1 hold ranks 0..held-1, so an appended token's rank is its slot.
  int32_t position_for_slot(const Cache&, uint32_t, uint32_t slot, uint64_t) const override { return int32_t(slot); }
  bool needs_scores() const override { return ops::rule_keeps_sums(settings_.rule); }
  bool takes_decode_logits() const override { return needs_scores(); }
  // A decode step's attention and eviction as one op (ops/decode_evict.h).
  bool record_attention(Cache& cache, uint32_t layer, uint32_t n_queries, View q, View out, const StepScores& scores) override;
  void after_attend(Cache& cache, uint32_t layer, const StepScores& scores) override;
  // Inside a step, H2O's, TOVA's and TreeKV's decode steps leave their scoring and eviction for
  // the step's end (ops/decode_evict.h), where layers alike share two dispatches (up to 32 layers
  // each); a layer touched again before settles on its own.
  void settle(Cache& cache, uint32_t layer) override;
  void settle_all(Cache& cache) override;
  void on_reset() override;
  size_t device_bytes_held() const override;

 private:
  // Per layer: S and C on the device and, under the rules that read scores, the decode's
  // logits, lse and the victim's candidates (decode_scores; all allocated at the layer's first
  // step); and what the host knows: tokens already scored, TreeKV's scope index idx - 1, and
  // the step left for the step's end (the host's books already count it done).
  struct LayerSteps {
    std::shared_ptr<Tensor> score_sums, score_counts, decode_scores;
    std::optional<ops::DeferredEviction> deferred;
    uint64_t scored_through = 0;
    uint32_t tree_index = 0;
    bool step_recorded = false;  // record_attention recorded this attend's step; after_attend keeps the books
  };
  void allocate(Cache& cache, uint32_t layer, LayerSteps& steps) const;
  // The step after an attend of n_queries (with nothing to evict, evictions 0) and its operands.
  ops::EvictionShape step_shape(const Cache& cache, uint32_t layer, uint32_t n_queries) const;
  // With `logits` and `lse`, a decode step's (record_attention), else `scores`.
  ops::EvictionArgs step_args(const Cache& cache, uint32_t layer, const StepScores& scores, View logits = {}, View lse = {}) const;
  // TreeKV §4.2: a prompt chunk that leaves more than c slots is cut down once by blocks.
  void prefill_by_blocks(Cache& cache, uint32_t layer);

  EvictionSettings settings_;
  std::vector<LayerSteps> layers_;
  // TreeKV prefill buffers, shared by the layers: the observation window's queries, output
  // and scores, the op's scratch, and a spare K and V the compacted layer is written to (then
  // swapped with the layer's, so the spare always holds some layer's old storage).
  std::shared_ptr<Tensor> window_queries_, window_out_, window_scores_, prefill_scratch_, spare_k_, spare_v_;
};

}  // namespace kvc
