// FOURIER: Liu et al., "Beyond Homogeneous Attention: Memory-Efficient LLMs via Fourier-
// Approximated KV Cache" (FourierAttention). The prompt is attended whole (eq. 3); from
// kvc_cache_end_prefill on, a layer holding more than L_init + 2N + L_local tokens (the
// authors' code compresses no shorter middle: it would not shrink) is split into the L_init
// sinks, the middle and the L_local local tokens (sec. 3.3, eq. 1-2). The middle's chosen dims
// (caller's table, or sec. 3.4's least reconstruction error per kv head under the layer's
// ratio: the inverted pyramid of sec. 4.1 by default) become C = (1/T) F X, eq. 4's 2N real
// coefficients per dim, with appendix D's per-dim standardization fitted on that middle
// (ops/hippo_fourier.h); its other dims are packed and kept per token (ops/gather_dims). The
// local window is a ring of L_local slots after the sinks: an append first folds the ring's
// oldest tokens into the middle (eq. 6, appendix C's update; their other dims packed after the
// middle's) and then takes their slots. Decode attention rebuilds the compressed dims where it
// reads them (eq. 5, ops/fourier_attention, never writing a rebuilt cache; on Vulkan
// factorized, its work growing as T log T per query head where appendix D's fused
// FlashFourierAttention's grows as L N (|D^kc| + |D^vc|)). Keys are compressed as the model
// stores them, after its RoPE (the paper's cache): libkvc's RoPE is refused. Choices where the paper leaves room: the same
// number of compressed dims for every kv head of a layer (the authors' tables vary it across a
// layer's heads); the pyramid's "last 8 layers" rule wins over "first 4" in models of fewer
// than 12 layers (the order of the authors' code); the standard deviation the appendix names,
// not the authors' largest deviation; every append folds at once (appendix D delays folds for
// speed; the attention it gives is the same up to which tokens are in the window).
#pragma once

#include <memory>
#include <vector>

#include "ops/hippo_fourier.h"
#include "policies/policy.h"

namespace kvc {

// One layer's compression plan for K or V: dims compressed per kv head, and the caller's
// table of them (uint32 [num_kv_heads][head_dim], compressed dims first) or empty for sec. 3.4.
struct FourierDimsPlan {
  uint32_t compressed = 0;
  std::vector<uint32_t> table;
};

class FourierPolicy : public Policy {
 public:
  FourierPolicy(const CacheConfig& config, const kvc_fourier_params& params, std::vector<FourierDimsPlan> key_plans,
                std::vector<FourierDimsPlan> value_plans);
  std::unique_ptr<Policy> clone() const override { return std::make_unique<FourierPolicy>(*this); }

  uint32_t slots_allocated() const override { return capacity_; }
  void check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const override;
  int32_t position_for_slot(const Cache& cache, uint32_t layer, uint32_t slot, uint64_t token_index) const override;
  AppendPlacement place_append(Cache& cache, uint32_t layer, uint32_t n_tokens) override;
  void appended(Cache& cache, uint32_t layer, uint32_t n_tokens) override;
  void allocate_device_state(Backend& backend) override;
  bool record_attention(Cache& cache, uint32_t layer, uint32_t n_queries, View q, View out, const StepScores& scores) override;
  bool attends_itself() const override { return true; }
  void check_attend(const Cache& cache, uint32_t layer, uint32_t n_queries, bool with_scores) const override;
  // Compresses a layer that passed L_init + 2N + L_local tokens in a decode step.
  void after_attend(Cache& cache, uint32_t layer, const StepScores& scores) override;
  void end_prefill(Cache& cache) override;
  uint32_t read_slots(const Cache& cache, uint32_t layer) const override;
  bool read(Cache& cache, uint32_t layer, void* k, void* v, int32_t* positions) override;
  size_t device_bytes_held() const override;
  void on_reset() override;

  // Records the compression of `layer`'s K (keys) or V middle, slots sinks .. sinks + length - 1
  // of `rows` ([num_kv_heads][slot_stride][head_dim]), into the layer's coefficients, affine
  // maps and packed runs (sec. 3.3-3.4, appendix D): every dim projected and fitted, the dims
  // chosen (unless the caller's table gives them), then gathered. The step kvc-bench times.
  void compress_middle(Backend& backend, uint32_t layer, bool keys, Tensor& rows, uint32_t slot_stride, uint32_t length);
  ops::HippoFourierShape compression_shape(uint32_t middle_length) const;
  // Dims per kv head of `layer`'s K (keys) or V that the middle compresses.
  uint32_t compressed_dims(uint32_t layer, bool keys) const {
    return keys ? key_plans_[layer].compressed : value_plans_[layer].compressed;
  }

 private:
  // K's or V's compressed middle.
  struct MiddlePart {
    uint32_t compressed = 0;                 // dims per kv head
    std::shared_ptr<Tensor> caller_dims;     // the caller's table, or null
    std::shared_ptr<Tensor> chosen_dims;     // sec. 3.4's choice, made at compression
    std::shared_ptr<Tensor> coefficients;    // f32 [num_kv_heads][2N][compressed]
    std::shared_ptr<Tensor> affine;          // f32 [num_kv_heads][2][compressed]
    std::shared_ptr<Tensor> packed;          // [num_kv_heads][head_dim - compressed][packed_stride]: dim-major

    Tensor& dims() const { return caller_dims ? *caller_dims : *chosen_dims; }
  };
  struct LayerMiddle {
    MiddlePart key, value;
    bool compressed = false;
    uint32_t middle_length = 0;  // tokens in the middle
    uint32_t ring_start = 0;     // the window's oldest token is at slot sinks + ring_start
  };

  void compress(Cache& cache, uint32_t layer);
  // Records the fold of `length` window tokens from ring slot `first_ring` into the middle at
  // index middle_index (eq. 6); appended() counts them.
  void fold(Cache& cache, uint32_t layer, uint32_t first_ring, uint32_t length, uint32_t middle_index) const;
  uint32_t middle_capacity() const { return capacity_ - sinks_ - local_window_; }
  // Tokens per dim's run of the packed middles: the capacity rounded up to 8, so that each run
  // starts 16-byte aligned (ops/fourier_attention.h).
  uint32_t packed_stride() const { return (middle_capacity() + 7) / 8 * 8; }
  uint32_t compress_above() const { return sinks_ + 2 * num_states_ + local_window_; }

  uint32_t capacity_;
  uint32_t sinks_;
  uint32_t local_window_;
  uint32_t num_states_;
  uint32_t window_length_;
  CacheConfig config_;  // policy_params is not read after creation
  std::vector<FourierDimsPlan> key_plans_, value_plans_;
  std::vector<LayerMiddle> layers_;
  bool prefill_ended_ = false;
  std::shared_ptr<Tensor> identity_dims_;  // uint32 [num_kv_heads][head_dim]: 0 .. head_dim - 1
  std::shared_ptr<Tensor> sink_indices_;   // uint32 [num_kv_heads][sinks]: 0 .. S-1, for ops::compact
  std::shared_ptr<Tensor> bins_;           // uint32 0 .. N - 1: the prompt compression's DFT bins (hippo_fourier_project)
  std::shared_ptr<void> attention_plan_;   // ops::fourier_attention_prepare: the decode step's transforms
  std::shared_ptr<void> compression_plan_; // ops::hippo_fourier_prepare: the prompt's, kept so ending one plans nothing
  // Every dim's coefficients, affine maps and errors while a middle is compressed (kept for the
  // next layer's compression).
  std::shared_ptr<Tensor> all_coefficients_, all_affine_, squared_error_;
};

// The parameters config.policy_params points to (NULL: the paper's), checked, and each layer's
// plans; throws KVC_ERROR_INVALID_ARGUMENT or _UNSUPPORTED naming the field and its limit.
std::unique_ptr<Policy> make_fourier_policy(const CacheConfig& config);

}  // namespace kvc
