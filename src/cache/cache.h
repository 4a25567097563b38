// A KV cache on one backend: per layer, K and V as [num_kv_heads][slots][head_dim] and an
// int32 position per slot, under a policy. Every public method validates everything first,
// so a call that throws leaves the cache unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "cache/cache_config.h"
#include "ops/attention.h"
#include "policies/policy.h"

namespace kvc {

struct LayerState {
  std::unique_ptr<Tensor> k;          // [num_kv_heads][slot_stride][head_dim], before RoPE
  std::unique_ptr<Tensor> v;          // [num_kv_heads][slot_stride][head_dim]
  std::unique_ptr<Tensor> positions;  // int32 [num_kv_heads][slot_stride]
  uint32_t slots_held = 0;            // the same for every kv head
  uint32_t last_append = 0;           // tokens of the latest append: the queries attend may take
  uint32_t last_queries = 0;          // queries of the latest attend (what its scores sum over)
  uint64_t tokens_seen = 0;           // tokens appended so far
};

class Cache {
 public:
  Cache(Backend& backend, const CacheConfig& config);

  // Host data in the cache dtype, laid out as kvc.h documents.
  void append(uint32_t layer, uint32_t n_tokens, const void* k, const void* v);
  void attend(uint32_t layer, uint32_t n_queries, const void* q, void* out, float* scores);
  void read(uint32_t layer, uint32_t max_slots, void* k, void* v, int32_t* positions);
  void reset();
  // Tells the policy the prompt is complete (kvc_cache_end_prefill).
  void end_prefill() { policy_->end_prefill(*this); }

  const CacheConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  Policy& policy() const { return *policy_; }
  uint32_t slot_stride() const { return slot_stride_; }
  LayerState& layer(uint32_t index) { return layers_[index]; }
  const LayerState& layer(uint32_t index) const { return layers_[index]; }
  // The shape of attention by n_queries newest tokens over everything `layer` holds.
  ops::AttentionShape attention_shape(uint32_t layer, uint32_t n_queries) const;
  // The device copy of the running attend call's Q: [n_queries][num_q_heads][head_dim].
  View attend_queries() const { return View{query_input_.get(), 0}; }
  View turn_table() const { return rope_turns_ ? View{rope_turns_.get(), 0} : View{}; }
  size_t bytes_per_slot() const;
  size_t device_bytes_held() const;
  uint64_t compressions() const { return compressions_; }
  void count_compression() { ++compressions_; }

 private:
  Backend& backend_;
  CacheConfig config_;
  std::unique_ptr<Policy> policy_;
  uint32_t slot_stride_ = 0;
  std::vector<LayerState> layers_;
  std::unique_ptr<Tensor> rope_turns_;
  std::unique_ptr<Tensor> query_input_;   // device copy of the attend call's Q
  std::unique_ptr<Tensor> attend_output_; // device output, then read back
  std::unique_ptr<Tensor> attend_scores_;
  uint64_t compressions_ = 0;
};

}  // namespace kvc
