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

size_t aligned(size_t bytes) { return (bytes + kPartAlignment - 1) / kPartAlignment * kPartAlignment; }

// A layer's part of each tensor, at least a word, so that a layer keeping no prefix slot
// still binds something: per slot its scores, pooled scores or hits, kept its indices at
// `index_stride` per kv head.
size_t per_slot_part(const SelectionShape& shape) {
  return aligned(std::max<size_t>(size_t(shape.scores.num_kv_heads) * shape.scores.num_prefix() * 4, 4));
}
size_t kept_part(const SelectionShape& shape, uint32_t index_stride) {
  return aligned(std::max<size_t>(size_t(shape.scores.num_kv_heads) * index_stride * 4, 4));
}

// Whether layers a and b rank alike: one top-k dispatch takes both, at one stride (each with
// its own k).
bool rank_alike(const SelectionShape& a, const SelectionShape& b) {
  return a.scores.num_kv_heads == b.scores.num_kv_heads && a.scores.num_prefix() == b.scores.num_prefix() &&
         a.indicator == b.indicator && a.hit_min_count == b.hit_min_count;
}

// Layers [first, end) that one top-k ranks (at most 65535 rows: a workgroup a row), their
// kept indices at one stride, the largest kept prefix among them. block_k holds each layer's
// kept prefix where they differ (PyramidKV's, P-HitKV's budgets), so such a run takes at most
// kTopKMaxBlockKs layers; empty where every layer keeps the same.
struct TopKRun {
  size_t first = 0, end = 0;
  uint32_t index_stride = 0;
  std::vector<uint32_t> block_k;
};

std::vector<TopKRun> top_k_runs(const std::vector<SelectionShape>& shapes, size_t first, size_t end) {
  std::vector<TopKRun> runs;
  for (size_t run = first; run < end;) {
    const SelectionShape& shape = shapes[run];
    TopKRun next{run, run + 1, shape.kept_prefix, {}};
    bool same_k = true;
    for (; next.end < end && rank_alike(shapes[next.end], shape); ++next.end) {
      const size_t layers = next.end - run + 1;
      const bool still_same = same_k && shapes[next.end].kept_prefix == shape.kept_prefix;
      if (layers * shape.scores.num_kv_heads > 65535 || (!still_same && layers > ops::kTopKMaxBlockKs)) break;
      same_k = still_same;
      next.index_stride = std::max(next.index_stride, shapes[next.end].kept_prefix);
    }
    if (!same_k)
      for (size_t layer = run; layer < next.end; ++layer) next.block_k.push_back(shapes[layer].kept_prefix);
    runs.push_back(std::move(next));
    run = runs.back().end;
  }
  return runs;
}

// Where each layer of a pass has its intermediates: its per-slot tensors (scores, pooled
// scores, hits; [num_kv_heads][num_prefix] floats or counts) and its kept indices
// ([num_kv_heads][its run's index stride]) each from an offset aligned for any binding, so a
// layer's part binds on its own and a run's layers (ranking alike) sit at one stride.
struct WorkspaceParts {
  std::vector<TopKRun> runs;
  std::vector<size_t> per_slot, kept;  // byte offsets, a layer each
  std::vector<uint32_t> kept_stride;   // indices per kv head, a layer each
  size_t per_slot_bytes = 0, kept_bytes = 0;
};

WorkspaceParts workspace_parts(const std::vector<SelectionShape>& shapes, size_t first, size_t end) {
  WorkspaceParts parts;
  parts.runs = top_k_runs(shapes, first, end);
  for (const TopKRun& run : parts.runs)
    for (size_t layer = run.first; layer < run.end; ++layer) {
      parts.per_slot.push_back(parts.per_slot_bytes);
      parts.kept.push_back(parts.kept_bytes);
      parts.kept_stride.push_back(run.index_stride);
      parts.per_slot_bytes += per_slot_part(shapes[layer]);
      parts.kept_bytes += kept_part(shapes[layer], run.index_stride);
    }
  return parts;
}

}  // namespace

std::vector<size_t> selection_passes(const std::vector<SelectionShape>& shapes, uint64_t limit_bytes) {
  // The per-slot parts bound the kept ones (kept_prefix <= num_prefix): they alone decide.
  std::vector<size_t> passes{0};
  uint64_t bytes = 0;
  for (size_t layer = 0; layer < shapes.size(); ++layer) {
    const uint64_t part = per_slot_part(shapes[layer]);
    if (layer > passes.back() && bytes + part > limit_bytes) {
      passes.push_back(layer);
      bytes = 0;
    }
    bytes += part;
  }
  passes.push_back(shapes.size());
  return passes;
}

void SelectionWorkspace::grow(std::shared_ptr<Tensor>& tensor, Backend& backend, size_t bytes) {
  if (!tensor || tensor->bytes() < bytes || &tensor->backend() != &backend) tensor = std::make_unique<Tensor>(backend, bytes);
}

Tensor& SelectionWorkspace::reserved(const std::shared_ptr<Tensor>& tensor, size_t bytes) {
  require(tensor && tensor->bytes() >= bytes, KVC_ERROR_INTERNAL, "selection workspace used before reserve() for this shape");
  return *tensor;
}

void SelectionWorkspace::reserve(Backend& backend, const std::vector<SelectionShape>& shapes) {
  const std::vector<size_t> passes = selection_passes(shapes, backend.tensor_limit().bytes);
  size_t per_slot_bytes = 4, kept_bytes = 4;
  for (size_t pass = 0; pass + 1 < passes.size(); ++pass) {
    const WorkspaceParts parts = workspace_parts(shapes, passes[pass], passes[pass + 1]);
    per_slot_bytes = std::max(per_slot_bytes, parts.per_slot_bytes);
    kept_bytes = std::max(kept_bytes, parts.kept_bytes);
  }
  grow(cumulative_, backend, per_slot_bytes);
  // The pooled scores or the hit counts, whichever each layer ranks by.
  for (WindowIndicator indicator : {WindowIndicator::PooledAttention, WindowIndicator::HitRate})
    if (std::any_of(shapes.begin(), shapes.end(), [&](const SelectionShape& shape) { return shape.indicator == indicator; }))
      grow(indicator == WindowIndicator::PooledAttention ? pooled_ : hits_, backend, per_slot_bytes);
  grow(kept_, backend, kept_bytes);
}

size_t SelectionWorkspace::bytes_held() const {
  size_t total = 0;
  for (const auto* tensor : {&cumulative_, &pooled_, &hits_, &kept_}) total += *tensor ? (*tensor)->bytes() : 0;
  return total;
}

void SelectionWorkspace::record(Backend& backend, const std::vector<SelectionShape>& shapes,
                                const std::function<View(size_t)>& window_queries, View turn_table,
                                const std::vector<LayerViews>& from, const std::vector<LayerViews>& to) {
  require(from.size() == shapes.size() && to.size() == shapes.size(), KVC_ERROR_INTERNAL, "selection: a storage per layer");
  const std::vector<size_t> passes = selection_passes(shapes, backend.tensor_limit().bytes);
  for (size_t pass = 0; pass + 1 < passes.size(); ++pass)
    record_pass(backend, shapes, passes[pass], passes[pass + 1], window_queries, turn_table, from, to);
}

void SelectionWorkspace::record_pass(Backend& backend, const std::vector<SelectionShape>& shapes, size_t first, size_t end,
                                     const std::function<View(size_t)>& window_queries, View turn_table,
                                     const std::vector<LayerViews>& from, const std::vector<LayerViews>& to) {
  const WorkspaceParts parts = workspace_parts(shapes, first, end);
  auto part = [&](const std::shared_ptr<Tensor>& tensor, size_t layer) {
    return View{&reserved(tensor, parts.per_slot_bytes), parts.per_slot[layer - first]};
  };
  for (size_t layer = first; layer < end; ++layer) {
    const SelectionShape& shape = shapes[layer];
    const ops::WindowScoresShape& scores = shape.scores;
    const View q = window_queries(layer);
    if (shape.indicator == WindowIndicator::PooledAttention) {
      ops::WindowScoresShape attention_only = scores;
      attention_only.hit_k = 0;  // pooled attention ranks by the sums alone: no hits to count
      ops::window_scores(backend, attention_only, {q, from[layer].k, from[layer].positions, turn_table, part(cumulative_, layer), View{}});
      ops::max_pool(backend, {scores.num_kv_heads, scores.num_prefix(), shape.pool_kernel}, {part(cumulative_, layer), part(pooled_, layer)});
    } else {
      // GQA: the cache holds one key per kv head, so each query head of the group observes it:
      // a kv head's hit rate is its hits over group x window rows (Eq. 1 with every query
      // head's distribution in L_w), which is the paper's per-head rule when the group is 1.
      ops::window_scores(backend, scores, {q, from[layer].k, from[layer].positions, turn_table, part(cumulative_, layer), part(hits_, layer)});
    }
  }
  Tensor& kept = reserved(kept_, parts.kept_bytes);
  for (const TopKRun& run : parts.runs) {
    const SelectionShape& shape = shapes[run.first];
    const uint32_t kv_heads = shape.scores.num_kv_heads, prefix = shape.scores.num_prefix();
    const ops::TopKShape top{uint32_t(run.end - run.first) * kv_heads,
                             prefix,
                             prefix,
                             run.index_stride,
                             run.index_stride,
                             shape.indicator == WindowIndicator::HitRate ? shape.hit_min_count : 0,
                             kv_heads,
                             uint32_t(per_slot_part(shape) / 4),
                             uint32_t(kept_part(shape, run.index_stride) / 4),
                             run.block_k};
    const View kept_run{&kept, parts.kept[run.first - first]};
    if (shape.indicator == WindowIndicator::PooledAttention)
      ops::top_k(backend, top, {part(pooled_, run.first), View{}, kept_run});
    else  // keys reaching hit_min_count rank first; the cumulative attention pads (or cuts) them
      ops::top_k(backend, top, {part(cumulative_, run.first), part(hits_, run.first), kept_run});
  }
  for (size_t layer = first; layer < end; ++layer) {
    const SelectionShape& shape = shapes[layer];
    const ops::WindowScoresShape& scores = shape.scores;
    const ops::CompactShape move{scores.num_kv_heads, scores.head_dim,    scores.slot_stride,
                                 shape.kept_prefix,   parts.kept_stride[layer - first], scores.num_prefix(),
                                 scores.window,       scores.dtype,        shape.out_slot_stride};
    ops::compact(backend, move, {View{&kept, parts.kept[layer - first]}, from[layer].k, from[layer].v, from[layer].positions,
                                 to[layer].k, to[layer].v, to[layer].positions});
  }
}

}  // namespace kvc
