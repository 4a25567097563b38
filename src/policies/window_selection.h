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
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "ops/window_scores.h"

namespace kvc {

enum class WindowIndicator { PooledAttention, HitRate };

struct SelectionShape {
  ops::WindowScoresShape scores;  // with hit rate, scores.hit_k is the hit coefficient K
  uint32_t kept_prefix = 0;  // prefix slots each kv head keeps (the budget less the window)
  WindowIndicator indicator = WindowIndicator::PooledAttention;
  uint32_t pool_kernel = 7;    // pooled attention: odd max-pooling kernel
  uint32_t hit_min_count = 0;  // hit rate: hits a key needs, theta times the rows observed
  uint32_t out_slot_stride = 0;  // slots per kv head of the storage compacted into
};

// Hits a key needs for hit rate >= theta over `rows` observation rows: the least c with
// c / rows >= theta, decided in double so theta = 0.5 over 128 rows needs exactly 64.
uint32_t hits_needed(float theta, uint32_t rows);

// A layer's storage as attention reads it: K and V [num_kv_heads][slot_stride][head_dim]
// (K before RoPE) and int32 positions [num_kv_heads][slot_stride].
struct LayerViews {
  View k, v, positions;
};

// The layers one pass of a selection takes: [passes[i], passes[i + 1]), as many consecutive
// layers as the workspace's parts hold within `limit_bytes` (one storage-buffer binding: a
// layer's part binds from its offset to the tensor's end), at least one each.
std::vector<size_t> selection_passes(const std::vector<SelectionShape>& shapes, uint64_t limit_bytes);

// The step's intermediate tensors for the layers of a selection pass, each layer in its own
// aligned part, grown on demand and reused across calls. A pass records every layer's scores
// first, then the top-k of each run of layers that rank alike (the same kv heads, prefix and
// rule; each layer with its own budget) as one dispatch (a layer's top-k is one workgroup per
// kv head: 8 on a GPU of 132 SMs, 36-50 us a layer on the H100 in the kvc-bench rows), then
// each layer's compaction.
class SelectionWorkspace {
 public:
  // Sizes the tensors for `shapes`, one a layer. Call it before recording, so that running out
  // of memory fails before anything is recorded (a tensor replaced later would be safe: the
  // backend keeps its buffer until the recorded work is done).
  void reserve(Backend& backend, const std::vector<SelectionShape>& shapes);

  // Records the selection of every layer of `shapes` (reserved): window_queries(i) records
  // what puts layer i's window queries in place ([window][num_q_heads][head_dim], before RoPE)
  // and returns them, just before that layer's scores; then the kept prefix slots (ascending)
  // and the window of from[i] are compacted into to[i] (other tensors, of
  // shapes[i].out_slot_stride slots per kv head).
  void record(Backend& backend, const std::vector<SelectionShape>& shapes, const std::function<View(size_t)>& window_queries,
              View turn_table, const std::vector<LayerViews>& from, const std::vector<LayerViews>& to);

  // Device bytes the workspace holds now.
  size_t bytes_held() const;

 private:
  static void grow(std::shared_ptr<Tensor>& tensor, Backend& backend, size_t bytes);
  // The reserved tensor, checked to hold `bytes`.
  static Tensor& reserved(const std::shared_ptr<Tensor>& tensor, size_t bytes);
  // Layers [first, end) of `shapes`, one pass.
  void record_pass(Backend& backend, const std::vector<SelectionShape>& shapes, size_t first, size_t end,
                   const std::function<View(size_t)>& window_queries, View turn_table, const std::vector<LayerViews>& from,
                   const std::vector<LayerViews>& to);
  std::shared_ptr<Tensor> cumulative_, pooled_, hits_, kept_;
};

}  // namespace kvc
