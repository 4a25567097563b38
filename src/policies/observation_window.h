// The observation-window policies: SNAPKV (Li et al. 2024, Sec. 4), PYRAMIDKV (Cai et al.
// 2025, Sec. 4), HITKV and P-HITKV (HitKV, Sec. "HitKV" and "Experiments"). The prompt is
// kept whole while it is prefilled; the queries of its last `window` tokens are remembered
// per layer; when the application ends the prefill, every layer longer than its budget keeps
// its window and the prefix slots its indicator selects (window_selection.h), compacted in
// their original order with their original positions. Decoding then appends normally.
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
};

// The defaults kvc_window_policy_params_default() returns (the papers' settings).
kvc_window_policy_params window_policy_defaults();

// The configuration kvc_window_policy_params asks for, validated against the cache (throws
// Error naming the field and its limit).
WindowPolicyConfig window_policy_config(const CacheConfig& config);

class WindowPolicy : public Policy {
 public:
  WindowPolicy(const CacheConfig& cache_config, WindowPolicyConfig config);
  uint32_t slots_allocated() const override { return capacity_; }
  void check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const override;
  int32_t position_for_slot(const Cache& cache, uint32_t layer, uint32_t slot, uint64_t token_index) const override;
  void observe_queries(Cache& cache, uint32_t layer, const void* q, uint32_t n_queries) override;
  void end_prefill(Cache& cache) override;

  // Tokens each layer keeps for a prompt of `slots_held` tokens (PyramidKV's depend on it).
  std::vector<uint32_t> layer_budgets(uint32_t slots_held) const;

 private:
  // The last `window` queries a layer attended with, oldest first, and how they were seen.
  struct WindowQueries {
    std::vector<unsigned char> rows;  // [window][num_q_heads][head_dim] in the cache dtype
    uint64_t observed = 0;            // consecutive tokens observed, ending at observed_until
    uint64_t observed_until = 0;      // the layer's tokens_seen when last observed
  };

  uint32_t capacity_;
  size_t query_row_bytes_;
  WindowPolicyConfig config_;
  std::vector<WindowQueries> windows_;
  SelectionWorkspace workspace_;
  std::unique_ptr<Tensor> window_q_;
  std::unique_ptr<Tensor> spare_k_, spare_v_, spare_positions_;  // one layer's storage, swapped in
};

}  // namespace kvc
