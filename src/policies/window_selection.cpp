#include "policies/window_selection.h"

#include <algorithm>
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

// Where each layer's intermediates lie: its per-slot tensors (scores, pooled scores, hits;
// [num_kv_heads][num_prefix] floats or counts) and its kept indices ([num_kv_heads][kept_prefix])
// each from an offset aligned for any binding, so a layer's part binds on its own and a run of
// layers of one shape sits at one stride.
struct WorkspaceParts {
  std::vector<size_t> per_slot, kept;  // byte offsets, a layer each
  size_t per_slot_bytes = 0, kept_bytes = 0;
};

constexpr size_t kPartAlignment = 256;  // the largest minStorageBufferOffsetAlignment Vulkan allows

size_t aligned(size_t bytes) { return (bytes + kPartAlignment - 1) / kPartAlignment * kPartAlignment; }

// A layer's part of each tensor, at least a word, so that a layer keeping no prefix slot
// still binds something.
size_t per_slot_part(const SelectionShape& shape) {
  return aligned(std::max<size_t>(size_t(shape.scores.num_kv_heads) * shape.scores.num_prefix() * 4, 4));
}
size_t kept_part(const SelectionShape& shape) {
  return aligned(std::max<size_t>(size_t(shape.scores.num_kv_heads) * shape.kept_prefix * 4, 4));
}

WorkspaceParts workspace_parts(const std::vector<SelectionShape>& shapes) {
  WorkspaceParts parts;
  for (const SelectionShape& shape : shapes) {
    parts.per_slot.push_back(parts.per_slot_bytes);
    parts.kept.push_back(parts.kept_bytes);
    parts.per_slot_bytes += per_slot_part(shape);
    parts.kept_bytes += kept_part(shape);
  }
  return parts;
}

// Whether layers a and b rank alike: one top-k dispatch takes both, at one stride.
bool rank_alike(const SelectionShape& a, const SelectionShape& b) {
  return a.scores.num_kv_heads == b.scores.num_kv_heads && a.scores.num_prefix() == b.scores.num_prefix() &&
         a.kept_prefix == b.kept_prefix && a.indicator == b.indicator && a.hit_min_count == b.hit_min_count;
}

}  // namespace

void SelectionWorkspace::grow(std::shared_ptr<Tensor>& tensor, Backend& backend, size_t bytes) {
  if (!tensor || tensor->bytes() < bytes || &tensor->backend() != &backend) tensor = std::make_unique<Tensor>(backend, bytes);
}

Tensor& SelectionWorkspace::reserved(const std::shared_ptr<Tensor>& tensor, size_t bytes) {
  require(tensor && tensor->bytes() >= bytes, KVC_ERROR_INTERNAL, "selection workspace used before reserve() for this shape");
  return *tensor;
}

void SelectionWorkspace::reserve(Backend& backend, const std::vector<SelectionShape>& shapes) {
  const WorkspaceParts parts = workspace_parts(shapes);
  grow(cumulative_, backend, parts.per_slot_bytes);
  // The pooled scores or the hit counts, whichever each layer ranks by.
  for (WindowIndicator indicator : {WindowIndicator::PooledAttention, WindowIndicator::HitRate})
    if (std::any_of(shapes.begin(), shapes.end(), [&](const SelectionShape& shape) { return shape.indicator == indicator; }))
      grow(indicator == WindowIndicator::PooledAttention ? pooled_ : hits_, backend, parts.per_slot_bytes);
  grow(kept_, backend, parts.kept_bytes);
}

size_t SelectionWorkspace::bytes_held() const {
  size_t total = 0;
  for (const auto* tensor : {&cumulative_, &pooled_, &hits_, &kept_}) total += *tensor ? (*tensor)->bytes() : 0;
  return total;
}

void SelectionWorkspace::record_scores(Backend& backend, const std::vector<SelectionShape>& shapes, size_t layer, View q,
                                       const LayerViews& from, View turn_table) {
  const WorkspaceParts parts = workspace_parts(shapes);
  const SelectionShape& shape = shapes[layer];
  const ops::WindowScoresShape& scores = shape.scores;
  const View cumulative{&reserved(cumulative_, parts.per_slot_bytes), parts.per_slot[layer]};
  if (shape.indicator == WindowIndicator::PooledAttention) {
    ops::WindowScoresShape attention_only = scores;
    attention_only.hit_k = 0;  // pooled attention ranks by the sums alone: no hits to count
    ops::window_scores(backend, attention_only, {q, from.k, from.positions, turn_table, cumulative, View{}});
    const View pooled{&reserved(pooled_, parts.per_slot_bytes), parts.per_slot[layer]};
    ops::max_pool(backend, {scores.num_kv_heads, scores.num_prefix(), shape.pool_kernel}, {cumulative, pooled});
  } else {
    // GQA: the cache holds one key per kv head, so each query head of the group observes it:
    // a kv head's hit rate is its hits over group x window rows (Eq. 1 with every query
    // head's distribution in L_w), which is the paper's per-head rule when the group is 1.
    const View hits{&reserved(hits_, parts.per_slot_bytes), parts.per_slot[layer]};
    ops::window_scores(backend, scores, {q, from.k, from.positions, turn_table, cumulative, hits});
  }
}

void SelectionWorkspace::record_selection(Backend& backend, const std::vector<SelectionShape>& shapes,
                                          const std::vector<LayerViews>& from, const std::vector<LayerViews>& to) {
  const WorkspaceParts parts = workspace_parts(shapes);
  Tensor& kept = reserved(kept_, parts.kept_bytes);
  for (size_t first = 0; first < shapes.size();) {
    // A run of layers that rank alike (at most 65535 rows: one workgroup a row), one top-k.
    const SelectionShape& shape = shapes[first];
    const uint32_t kv_heads = shape.scores.num_kv_heads, prefix = shape.scores.num_prefix();
    size_t end = first + 1;
    while (end < shapes.size() && rank_alike(shapes[end], shape) && (end - first + 1) * kv_heads <= 65535) ++end;
    const uint32_t layers = static_cast<uint32_t>(end - first);
    const ops::TopKShape top{layers * kv_heads, prefix, prefix, shape.kept_prefix, shape.kept_prefix,
                             shape.indicator == WindowIndicator::HitRate ? shape.hit_min_count : 0,
                             kv_heads, uint32_t(per_slot_part(shape) / 4), uint32_t(kept_part(shape) / 4)};
    const View kept_run{&kept, parts.kept[first]};
    if (shape.indicator == WindowIndicator::PooledAttention) {
      ops::top_k(backend, top, {View{&reserved(pooled_, parts.per_slot_bytes), parts.per_slot[first]}, View{}, kept_run});
    } else {
      // Keys reaching hit_min_count rank first; the cumulative attention pads (or cuts) them.
      ops::top_k(backend, top, {View{&reserved(cumulative_, parts.per_slot_bytes), parts.per_slot[first]},
                                View{&reserved(hits_, parts.per_slot_bytes), parts.per_slot[first]}, kept_run});
    }
    first = end;
  }
  for (size_t layer = 0; layer < shapes.size(); ++layer) {
    const ops::WindowScoresShape& scores = shapes[layer].scores;
    const ops::CompactShape move{scores.num_kv_heads, scores.head_dim,     scores.slot_stride,
                                 shapes[layer].kept_prefix, shapes[layer].kept_prefix, scores.num_prefix(),
                                 scores.window,       scores.dtype,        shapes[layer].out_slot_stride};
    ops::compact(backend, move, {View{&kept, parts.kept[layer]}, from[layer].k, from[layer].v, from[layer].positions,
                                 to[layer].k, to[layer].v, to[layer].positions});
  }
}

}  // namespace kvc
