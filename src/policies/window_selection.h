// The selection step shared by the observation-window policies, as ops on a Backend (the
// policies and kvc-bench both record it): score the prefix with the window's queries, rank it
// by the policy's indicator, and pick the prefix slots each kv head keeps.
//  - Pooled attention (SnapKV, Li et al. 2024, Sec. 4.2; PyramidKV, Cai et al. 2025): the
//    window's probabilities summed over its queries and the group's heads, max-pooled, top k.
//  - Hit rate (HitKV, Sec. "Hit Rate" and "Hit-based KV Eviction Algorithm"): each window
//    query's top-K prefix keys get a hit; keys whose hit rate reaches theta are kept first and
//    every head is then padded (or cut) to the same length by the window-cumulative attention.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "ops/window_scores.h"

namespace kvc {

enum class WindowIndicator { PooledAttention, HitRate };

struct SelectionShape {
  ops::WindowScoresShape scores;
  uint32_t kept_prefix = 0;  // prefix slots each kv head keeps (the budget less the window)
  WindowIndicator indicator = WindowIndicator::PooledAttention;
  uint32_t pool_kernel = 7;    // pooled attention: odd max-pooling kernel
  uint32_t hit_k = 0;          // hit rate: the hit coefficient K, <= the prefix length
  uint32_t hit_min_count = 0;  // hit rate: hits a key needs, theta times the rows observed
};

// Hits a key needs for hit rate >= theta over `rows` observation rows: the least c with
// c / rows >= theta, decided in double so theta = 0.5 over 128 rows needs exactly 64.
uint32_t hits_needed(float theta, uint32_t rows);

// The intermediate tensors of the step, grown on demand and reused across calls.
class SelectionWorkspace {
 public:
  // Records the step; `kept` receives uint32 [num_kv_heads][kept_prefix], ascending prefix slots.
  // q is the window's queries ([window][num_q_heads][head_dim], before RoPE); k, positions
  // and turn_table are the layer's, as attention reads them.
  void record(Backend& backend, const SelectionShape& shape, View q, View k, View positions, View turn_table, View kept);

 private:
  Tensor& grown(std::unique_ptr<Tensor>& tensor, Backend& backend, size_t bytes);

  std::unique_ptr<Tensor> probs_, cumulative_, pooled_, hit_lists_, hits_;
};

}  // namespace kvc
