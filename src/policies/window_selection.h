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

// The step's intermediate tensors for every layer of a selection, each layer in its own
// aligned part, grown on demand and reused across calls. A selection records every layer's
// scores first, then the top-k of each run of layers that rank alike as one dispatch (a layer's
// top-k is one workgroup per kv head: 8 on a GPU of 132 SMs, 36-50 us a layer on the H100 in
// the kvc-bench rows), then each layer's compaction.
class SelectionWorkspace {
 public:
  // Sizes the tensors for `shapes`, one a layer. Call it before recording any of them, so that
  // running out of memory fails before anything is recorded (a tensor replaced later would be
  // safe: the backend keeps its buffer until the recorded work is done).
  void reserve(Backend& backend, const std::vector<SelectionShape>& shapes);

  // Records the scores and the ranking indicator of layer `layer` (shapes[layer]) into its part:
  // q is the window's queries ([window][num_q_heads][head_dim], before RoPE), `from` the layer's
  // storage.
  void record_scores(Backend& backend, const std::vector<SelectionShape>& shapes, size_t layer, View q, const LayerViews& from,
                     View turn_table);

  // Once every layer's scores are recorded: the top-k, then the compaction of each layer's kept
  // prefix slots (ascending) and window from from[i] into to[i] (other tensors, of
  // shapes[i].out_slot_stride slots per kv head).
  void record_selection(Backend& backend, const std::vector<SelectionShape>& shapes, const std::vector<LayerViews>& from,
                        const std::vector<LayerViews>& to);

  // Device bytes the workspace holds now.
  size_t bytes_held() const;

 private:
  static void grow(std::shared_ptr<Tensor>& tensor, Backend& backend, size_t bytes);
  // The reserved tensor, checked to hold `bytes`.
  static Tensor& reserved(const std::shared_ptr<Tensor>& tensor, size_t bytes);
  std::shared_ptr<Tensor> cumulative_, pooled_, hits_, kept_;
};

}  // namespace kvc
