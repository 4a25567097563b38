#include "policies/window_selection.h"

#include <cmath>

#include "ops/hit_count.h"
#include "ops/max_pool.h"
#include "ops/top_k.h"

namespace kvc {

uint32_t hits_needed(float theta, uint32_t rows) {
  uint32_t count = static_cast<uint32_t>(std::ceil(double(theta) * rows));
  while (count > 0 && double(count - 1) / rows >= double(theta)) --count;
  return count;
}

Tensor& SelectionWorkspace::grown(std::unique_ptr<Tensor>& tensor, Backend& backend, size_t bytes) {
  if (!tensor || tensor->bytes() < bytes || &tensor->backend() != &backend) tensor = std::make_unique<Tensor>(backend, bytes);
  return *tensor;
}

void SelectionWorkspace::record(Backend& backend, const SelectionShape& shape, View q, View k, View positions, View turn_table,
                                View kept) {
  const ops::WindowScoresShape& scores = shape.scores;
  const uint32_t prefix = scores.num_prefix();
  const uint32_t rows = scores.num_q_heads * scores.window;  // one per (query head, window query)
  Tensor& probs = grown(probs_, backend, size_t(rows) * prefix * 4);
  Tensor& cumulative = grown(cumulative_, backend, size_t(scores.num_kv_heads) * prefix * 4);
  ops::window_scores(backend, scores, {q, k, positions, turn_table, view(probs), view(cumulative)});

  if (shape.indicator == WindowIndicator::PooledAttention) {
    Tensor& pooled = grown(pooled_, backend, size_t(scores.num_kv_heads) * prefix * 4);
    ops::max_pool(backend, {scores.num_kv_heads, prefix, shape.pool_kernel}, {view(cumulative), view(pooled)});
    ops::top_k(backend, {scores.num_kv_heads, prefix, prefix, shape.kept_prefix, shape.kept_prefix, 0}, {view(pooled), View{}, kept});
    return;
  }
  // GQA: the cache holds one key per kv head, so each query head of the group observes it:
  // a kv head's hit rate is its hits over group x window rows (Eq. 1 with every query head's
  // distribution in L_w), which is the paper's per-head rule when the group is 1.
  Tensor& hit_lists = grown(hit_lists_, backend, size_t(rows) * shape.hit_k * 4);
  Tensor& hits = grown(hits_, backend, size_t(scores.num_kv_heads) * prefix * 4);
  ops::top_k(backend, {rows, prefix, prefix, shape.hit_k, shape.hit_k, 0}, {view(probs), View{}, view(hit_lists)});
  ops::hit_count(backend, {scores.num_kv_heads, rows / scores.num_kv_heads, shape.hit_k, shape.hit_k, prefix},
                 {view(hit_lists), view(hits)});
  ops::top_k(backend, {scores.num_kv_heads, prefix, prefix, shape.kept_prefix, shape.kept_prefix, shape.hit_min_count},
             {view(cumulative), view(hits), kept});
}

}  // namespace kvc
