// FREQKV: Kai et al., "FreqKV: Key-Value Compression in Frequency Domain for Context Window
// Extension". Section 3.4: the first S slots (attention sinks) are never touched; when a
// layer's cache holds N slots, the M = N - S slots after the sinks (earlier compressed slots and
// newer tokens alike) are compressed to L = floor(gamma M) slots by section 3.3's eq. 3 (DCT
// along the sequence, keep the lowest L components, IDCT, rescale by sqrt(L / M), appendix
// F.5), and new tokens append after them. The authors' code (llama_attn_replace_dct_mempe.py)
// also keeps the newest R slots out of the transform: then M = N - S - R and those R slots
// follow the L compressed ones unchanged; R = 0 is the paper. Keys are stored before RoPE and
// every slot carries its index in the cache as its position (section 3.4, appendix C), so
// attention never sees a position of N or more. K and V of every kv head are compressed
// independently. L = floor(gamma M) and the sqrt(L / M) rescale follow ../shared/DESIGN.md
// (which writes M = N - S, R being 0 there), as does the authors' fft_size = int(fft_span * fft_ratio).
#pragma once

#include "ops/frequency_compress.h"
#include "policies/policy.h"

namespace kvc {

class FreqKvPolicy : public Policy {
 public:
  FreqKvPolicy(const CacheConfig& config, const kvc_freqkv_params& params);
  std::unique_ptr<Policy> clone() const override { return std::make_unique<FreqKvPolicy>(*this); }

  uint32_t slots_allocated() const override { return window_; }
  void check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const override;
  int32_t position_for_slot(const Cache& cache, uint32_t layer, uint32_t slot, uint64_t token_index) const override;
  void allocate_device_state(Backend& backend) override;
  // Compresses `layer` when it holds the whole window: the last token that filled it has
  // attended to the uncompressed cache (section 3.4), the next one sees the compressed one.
  void after_attend(Cache& cache, uint32_t layer, const StepScores& scores) override;
  bool appends_inside_decode() const override { return true; }

  // Records one compression of `states` (one layer's K or V, [num_kv_heads][slot_stride]
  // [head_dim], the window full) on the backend allocate_device_state was given: slots
  // S .. N-R-1 become the L compressed slots S .. S+L-1, and slots N-R .. N-1 move to
  // S+L .. S+L+R-1. The step kvc-bench times.
  void compress(Tensor& states, uint32_t slot_stride);

  uint32_t window() const { return window_; }
  uint32_t sink_slots() const { return sink_slots_; }
  uint32_t recent_slots() const { return recent_slots_; }
  uint32_t compressed_slots() const { return window_ - sink_slots_ - recent_slots_; }
  uint32_t retained_slots() const { return retained_slots_; }

 private:
  uint32_t window_;          // N
  uint32_t sink_slots_;      // S
  uint32_t recent_slots_;    // R
  uint32_t retained_slots_;  // L
  uint32_t num_kv_heads_;
  uint32_t head_dim_;
  Dtype dtype_;
  Backend* backend_ = nullptr;

  ops::FrequencyCompressShape compress_shape(uint32_t slot_stride) const;
};

// The parameters config.policy_params points to (NULL: the paper's defaults), checked
// against the cache's capacity; throws KVC_ERROR_INVALID_ARGUMENT naming the field and limit.
kvc_freqkv_params freqkv_params(const CacheConfig& config);

}  // namespace kvc
