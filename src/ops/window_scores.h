// Attention of an observation window over the keys before it (SnapKV, Li et al. 2024,
// Sec. 4.2; HitKV, Sec. "Hit Rate"): the last `window` cached slots are the window; each of
// their queries, per query head, takes a softmax over every slot it sees (the prefix and the
// window up to itself, causal), with RoPE and the 1/sqrt(head_dim) scale as attention
// applies them. Returns the probabilities' sum per kv head over the group's heads and the
// window's queries (SnapKV's score, HitKV's "recent-cumulative attention") and, with hit_k,
// HitKV's hits (Definition 1): per kv head and prefix slot, how many of the group's
// (query head, window query) rows rank it in their top hit_k prefix slots by probability
// (a higher logit first, then the earlier position). The probabilities themselves are not
// returned: 128 MiB a layer at a 32K prefix (32 query heads, window 32), a write and a read
// neither indicator needs.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"
#include "ops/rope.h"

namespace kvc::ops {

struct WindowScoresShape {
  uint32_t num_q_heads = 0;
  uint32_t num_kv_heads = 0;  // divides num_q_heads
  uint32_t head_dim = 0;      // multiple of 8, <= 256
  uint32_t window = 0;        // >= 1; num_q_heads * window <= 65535
  uint32_t num_slots = 0;     // > window: the prefix (num_slots - window) and the window
  uint32_t slot_stride = 0;   // slots allocated per kv head
  Dtype dtype = Dtype::F32;   // of q and k
  RopeParams rope;
  uint32_t hit_k = 0;         // K of HitKV's hits, <= num_prefix; 0: no hits

  uint32_t num_prefix() const { return num_slots - window; }
};

struct WindowScoresArgs {
  View q;           // [window][num_q_heads][head_dim], the window's queries before RoPE
  View k;           // [num_kv_heads][slot_stride][head_dim], before RoPE
  View positions;   // int32 [num_kv_heads][slot_stride]; queries take kv head 0's
  View turn_table;  // rope_turn_table(rope); Vulkan with RoPE only
  View cumulative;  // f32 [num_kv_heads][num_prefix]
  View hits;        // uint32 [num_kv_heads][num_prefix], with hit_k only
};

void window_scores(Backend& backend, const WindowScoresShape& shape, const WindowScoresArgs& args);
// Whether window_scores_vulkan computes the logits on cooperative matrices: the device's path is
// cooperative (vk::Device::matrix_path), the cache is f16, head_dim a multiple of 16 up to 128,
// the workgroup fits the device, and with RoPE the prefix's keys rotated once
// (rotated_reads_vulkan.h) fit one binding.
bool window_logits_on_cooperative_matrices(Backend& backend, const WindowScoresShape& shape);
void window_scores_cpu(const WindowScoresShape& shape, const WindowScoresArgs& args);
void window_scores_vulkan(Backend& backend, const WindowScoresShape& shape, const WindowScoresArgs& args);

}  // namespace kvc::ops
