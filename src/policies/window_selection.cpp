#include "policies/window_selection.h"

#include <cmath>

#include "ops/compact.h"
#include "ops/max_pool.h"
#include "ops/top_k.h"

namespace kvc {

uint32_t hits_needed(float theta, uint32_t rows) {
  uint32_t count = static_cast<uint32_t>(std::ceil(double(theta) * rows));
  while (count > 0 && double(count - 1) / rows >= double(theta)) --count;
  return count;
}

namespace {

// Bytes of each intermediate for one shape.
struct WorkspaceBytes {
  size_t per_kv_slot, kept;
};

WorkspaceBytes workspace_bytes(const SelectionShape& shape) {
  const ops::WindowScoresShape& scores = shape.scores;
  // One kept index more than needed, so the tensor exists when no prefix slot is kept.
  return {size_t(scores.num_kv_heads) * scores.num_prefix() * 4, (size_t(scores.num_kv_heads) * shape.kept_prefix + 1) * 4};
}

}  // namespace

void SelectionWorkspace::grow(std::shared_ptr<Tensor>& tensor, Backend& backend, size_t bytes) {
  if (!tensor || tensor->bytes() < bytes || &tensor->backend() != &backend) tensor = std::make_unique<Tensor>(backend, bytes);
}

Tensor& SelectionWorkspace::reserved(const std::shared_ptr<Tensor>& tensor, size_t bytes) {
  require(tensor && tensor->bytes() >= bytes, KVC_ERROR_INTERNAL, "selection workspace used before reserve() for this shape");
  return *tensor;
}

void SelectionWorkspace::reserve(Backend& backend, const SelectionShape& shape) {
  const WorkspaceBytes bytes = workspace_bytes(shape);
  grow(cumulative_, backend, bytes.per_kv_slot);
  // The pooled scores or the hit counts, whichever the indicator ranks by.
  grow(shape.indicator == WindowIndicator::PooledAttention ? pooled_ : hits_, backend, bytes.per_kv_slot);
  grow(kept_, backend, bytes.kept);
}

size_t SelectionWorkspace::bytes_held() const {
  size_t total = 0;
  for (const auto* tensor : {&cumulative_, &pooled_, &hits_, &kept_}) total += *tensor ? (*tensor)->bytes() : 0;
  return total;
}

void SelectionWorkspace::record(Backend& backend, const SelectionShape& shape, View q, const LayerViews& from, View turn_table,
                                const LayerViews& to) {
  const ops::WindowScoresShape& scores = shape.scores;
  const uint32_t prefix = scores.num_prefix();
  const WorkspaceBytes bytes = workspace_bytes(shape);
  Tensor& cumulative = reserved(cumulative_, bytes.per_kv_slot);
  Tensor& kept = reserved(kept_, bytes.kept);
  if (shape.indicator == WindowIndicator::PooledAttention) {
    ops::WindowScoresShape attention_only = scores;
    attention_only.hit_k = 0;  // pooled attention ranks by the sums alone: no hits to count
    ops::window_scores(backend, attention_only, {q, from.k, from.positions, turn_table, view(cumulative), View{}});
    Tensor& pooled = reserved(pooled_, bytes.per_kv_slot);
    ops::max_pool(backend, {scores.num_kv_heads, prefix, shape.pool_kernel}, {view(cumulative), view(pooled)});
    ops::top_k(backend, {scores.num_kv_heads, prefix, prefix, shape.kept_prefix, shape.kept_prefix, 0},
               {view(pooled), View{}, view(kept)});
  } else {
    // GQA: the cache holds one key per kv head, so each query head of the group observes it:
    // a kv head's hit rate is its hits over group x window rows (Eq. 1 with every query
    // head's distribution in L_w), which is the paper's per-head rule when the group is 1.
    // Keys reaching hit_min_count rank first; the cumulative attention pads (or cuts) them.
    Tensor& hits = reserved(hits_, bytes.per_kv_slot);
    ops::window_scores(backend, scores, {q, from.k, from.positions, turn_table, view(cumulative), view(hits)});
    ops::top_k(backend, {scores.num_kv_heads, prefix, prefix, shape.kept_prefix, shape.kept_prefix, shape.hit_min_count},
               {view(cumulative), view(hits), view(kept)});
  }
  const ops::CompactShape move{scores.num_kv_heads, scores.head_dim, scores.slot_stride, shape.kept_prefix, shape.kept_prefix,
                               prefix, scores.window, scores.dtype, shape.out_slot_stride};
  ops::compact(backend, move, {view(kept), from.k, from.v, from.positions, to.k, to.v, to.positions});
}

}  // namespace kvc
