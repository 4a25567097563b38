// FAEDKV: Li et al., "FAEDKV: Infinite-Window Fourier Transform for Unbiased KV Cache
// Compression". The prompt is kept whole until kvc_cache_end_prefill; then (sec. 4.2.1, eq. 10)
// each layer's middle segment of M = N - S - R tokens becomes the DFT bins of its kept chunks
// (sec. 3.2: C contiguous chunks of the M bins, the top r*C by the ablation's Delta_{l,c} of
// eq. 7, or a caller's table, or the lowest frequencies), stored once per conjugate pair as a
// running mean (S = X / M). The R recent tokens live in a ring of R + 1 slots after the S
// sinks; the slot before the window's oldest (the spare) is outside the window. A decode
// token's append takes the spare slot, and the window's oldest token, leaving it, becomes the
// spare and is pending: the step's attention folds it into the bins (eq. 9's IWDFT) as it reads
// them (ops/spectral_attention's fold_excluded), where a pass of its own (ops/spectral_fold)
// would read and write both tables once more. What must leave before that (a pending token when
// another append comes first; all but the last of several tokens appended at once) is folded
// by ops/spectral_fold as the append is recorded. So attention sees sinks, the reconstructed
// segment and exactly the last R tokens (eq. 13). Attention is computed from the bins
// (ops/spectral_attention), never from a rebuilt segment (eq. 11's sparse IDFT is what it
// avoids). Keys are transformed as the model stores them (after its RoPE): libkvc's own RoPE is
// refused. ../shared/DESIGN.md: N in eq. 9 is the number of tokens folded so far.
#pragma once

#include <memory>
#include <vector>

#include "cache/layer_storage.h"
#include "ops/bin_span.h"
#include "policies/policy.h"

namespace kvc {

class FaedKvPolicy : public Policy {
 public:
  // kept_chunks: per layer, per chunk, whether the chunk is kept.
  FaedKvPolicy(const CacheConfig& config, const kvc_faedkv_params& params, std::vector<std::vector<bool>> kept_chunks);
  std::unique_ptr<Policy> clone() const override { return std::make_unique<FaedKvPolicy>(*this); }

  uint32_t slots_allocated() const override { return capacity_; }
  void check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const override;
  int32_t position_for_slot(const Cache& cache, uint32_t layer, uint32_t slot, uint64_t token_index) const override;
  AppendPlacement place_append(Cache& cache, uint32_t layer, uint32_t n_tokens) override;
  void appended(Cache& cache, uint32_t layer, uint32_t n_tokens) override;
  bool record_attention(Cache& cache, uint32_t layer, uint32_t n_queries, View q, View out, const StepScores& scores) override;
  bool attends_itself() const override { return true; }
  void check_attend(const Cache& cache, uint32_t layer, uint32_t n_queries, bool with_scores) const override;
  void end_prefill(Cache& cache) override;
  uint32_t read_slots(const Cache& cache, uint32_t layer) const override;
  bool read(Cache& cache, uint32_t layer, void* k, void* v, int32_t* positions) override;
  size_t device_bytes_held() const override;
  bool compressed() const { return !spectra_.empty(); }
  void on_reset() override;

 private:
  struct LayerSpectrum {
    // Shared by the clones a transaction saves (kvc.h: a failed call changes nothing): set once
    // per prompt; the states change in place only in recorded work, which a failed call never
    // submits (on the CPU, ops/spectral_attention and ops/spectral_fold write them last).
    std::shared_ptr<const std::vector<uint32_t>> bins;
    std::shared_ptr<Tensor> bin_table;  // uint32 [bins]
    std::shared_ptr<Tensor> bin_map;    // ops::spectral_bin_map
    std::shared_ptr<Tensor> key_states, value_states;  // f32 (re, im) [num_kv_heads][bins][head_dim]
    uint32_t segment_length = 0;        // M
    ops::BinSpan span;                  // ops::mirrored_bin_span(bins, M): what the transforms form
    uint64_t folded = 0;                // N: tokens in the state (M after the prompt)
    uint32_t ring_start = 0;            // the window's oldest token is at slot sinks + ring_start
    bool pending = false;               // the spare slot's token left the window but is not in the state yet
    std::shared_ptr<void> attention_plan;  // ops::spectral_attention_keep
  };

  // Allocates `layer`'s spectrum (its segment length, bins and span already set) and the storage
  // of its sinks and recent window, and records their filling; changes nothing.
  void transform_prompt(Cache& cache, uint32_t layer, LayerSpectrum& spectrum, LayerStorage& kept) const;
  // Records the fold of `count` tokens from ring slot `first` (the oldest first) into `layer`'s state.
  void record_fold(Cache& cache, uint32_t layer, uint32_t first, uint32_t count) const;
  uint32_t ring_slots() const { return recent_window_ + 1; }
  // The ring slot outside the window: the spare.
  uint32_t spare_slot(const LayerSpectrum& spectrum) const { return (spectrum.ring_start + recent_window_) % ring_slots(); }

  uint32_t capacity_;
  uint32_t sinks_;
  uint32_t recent_window_;
  uint32_t chunks_;
  std::vector<std::vector<bool>> kept_chunks_;
  CacheConfig config_;  // policy_params is not read after creation
  std::vector<LayerSpectrum> spectra_;  // empty until the prompt ends
  std::shared_ptr<Tensor> sink_indices_;  // uint32 [num_kv_heads][sinks]: 0 .. S-1, for ops::compact
};

// The chunks kept without a table: the lowest frequencies, max(1, round(r C)) of them.
std::vector<bool> faedkv_default_chunks(uint32_t chunks, float retain_ratio);
// The bins stored for the kept chunks of a segment of M (each k <= M/2 standing for k and M - k).
std::vector<uint32_t> faedkv_stored_bins(const std::vector<bool>& kept_chunks, uint32_t segment_length);

// kvc_faedkv_ablate: `layer` read whole, its middle segment without chunk `pruned_chunk` (eq. 6).
void faedkv_ablate(Cache& cache, uint32_t layer, const kvc_faedkv_params& params, uint32_t pruned_chunk, void* k, void* v);

// The parameters config.policy_params points to (NULL: the paper's), checked, and the chunks
// each layer keeps; throws KVC_ERROR_INVALID_ARGUMENT or _UNSUPPORTED naming the field.
std::unique_ptr<Policy> make_faedkv_policy(const CacheConfig& config);

}  // namespace kvc
