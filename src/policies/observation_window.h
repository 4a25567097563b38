// The observation-window policies: SNAPKV (Li et al. 2024, Sec. 4), PYRAMIDKV (Cai et al.
// 2025, Sec. 4), HITKV and P-HITKV (HitKV, Sec. "HitKV" and "Experiments"). The prompt is
// kept whole while it is prefilled; the queries of its last `window` tokens are kept per layer
// on the device (a ring of `window` rows, recorded with each attend, so nothing is read back);
// when the application ends the prefill, every layer longer than its budget keeps its window
// and the prefix slots its indicator selects (window_selection.h), compacted in their original
// order with their original positions into new storage of budget + decode slots, and the
// prompt's storage is released. Decoding then appends normally.
// Neither paper reserves attention sinks: early tokens stay only if the indicator keeps them.
#pragma once

#include <memory>
#include <vector>

#include "policies/policy.h"
#include "policies/window_selection.h"

namespace kvc {

struct WindowPolicyConfig {
  WindowIndicator indicator = WindowIndicator::PooledAttention;
  bool pyramid = false;                // PyramidKV's schedule (or the table) instead of a uniform budget
  uint32_t budget = 0;                 // per layer, window included (the average with `pyramid`)
  uint32_t window = 32;
  uint32_t pool_kernel = 7;
  uint32_t hit_k = 0;                  // 0: the layer's budget
  float hit_threshold = 0.5f;
  double pyramid_beta = 20.0;
  std::vector<uint32_t> layer_budgets;  // an application's table, or empty
  uint32_t decode_slots = KVC_DECODE_SLOTS_DEFAULT;
};

// The defaults kvc_window_policy_params_default() returns (the papers' settings).
kvc_window_policy_params window_policy_defaults();

// The configuration kvc_window_policy_params asks for, validated against the cache (throws
// Error naming the field and its limit).
WindowPolicyConfig window_policy_config(const CacheConfig& config);

class WindowPolicy : public Policy {
 public:
  WindowPolicy(const CacheConfig& cache_config, WindowPolicyConfig config);
  std::unique_ptr<Policy> clone() const override { return std::make_unique<WindowPolicy>(*this); }
  uint32_t slots_allocated() const override { return capacity_; }
  void check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const override;
  int32_t position_for_slot(const Cache& cache, uint32_t layer, uint32_t slot, uint64_t token_index) const override;
  void allocate_device_state(Backend& backend) override;
  void observe_queries(Cache& cache, uint32_t layer, View q, uint32_t n_queries) override;
  void end_prefill(Cache& cache) override;
  bool appends_inside_decode() const override { return true; }
  size_t device_bytes_held() const override;

  // Tokens each layer keeps for a prompt of `slots_held` tokens (PyramidKV's depend on it).
  std::vector<uint32_t> layer_budgets(uint32_t slots_held) const;

 private:
  // How a layer's recent queries were seen (the rows themselves live in query_rings_).
  struct WindowQueries {
    uint64_t observed = 0;        // consecutive tokens observed, ending at observed_until
    uint64_t observed_until = 0;  // the layer's tokens_seen when last observed
  };
  // Records copies of `tokens` consecutive query rows, from `first_token` on, between a
  // layer's ring (token t in row t mod window) and `rows` (`to_ring`: rows into the ring).
  void copy_ring(Backend& backend, uint32_t layer, uint64_t first_token, uint32_t tokens, View rows, bool to_ring) const;

  uint32_t capacity_;
  size_t query_row_bytes_;
  WindowPolicyConfig config_;
  std::vector<WindowQueries> windows_;
  SelectionWorkspace workspace_;
  // [num_layers][window][num_q_heads][head_dim] in the cache dtype, and one layer's window of
  // queries in order, oldest first, as the selection reads them.
  std::shared_ptr<Tensor> query_rings_, window_q_;
};

}  // namespace kvc
