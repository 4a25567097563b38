// Decode attention over a FourierAttention layer (sec. 3.3, eq. 5; appendix D): one query
// token over the layer's full rows (sinks, local window and the query's own token; before
// RoPE and rotated to their positions as they are read, as ops/attention does) and its middle
// tokens, whose keys and values are rebuilt where they are used: uncompressed dims from packed
// rows, compressed dims as scale (F^T C) + offset (ops/hippo_fourier.h). Middle keys are kept
// after RoPE (the paper compresses the cache as attention sees it), so they are not rotated.
// Two Vulkan routes, neither writing a rebuilt cache. Fused, like FlashFourierAttention
// (appendix D): each workgroup rebuilds a tile of middle tokens in shared memory and attends to
// it, O(L N' (|D^kc| + |D^vc|)) work. Factorized (the issue's): the compressed dims' logits are
// F^T (C_k q~) + b, one DFT of 2N values per query head evaluated at the L middle tokens, and
// their values' share is C_v^T (F p), one DFT of the L probabilities at N bins (both VkFFT
// transforms of length T, two query heads per complex sequence since both signals are real), so
// the work is O(T log T + L |D^u|) per query head; the uncompressed dims and the full rows are
// read once per kv head, by a flash-decoding split and merge. Factorized takes no RoPE.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "common/dtype.h"
#include "ops/rope.h"

namespace kvc::ops {

enum class FourierAttentionRoute { Fused, Factorized };

struct FourierAttentionShape {
  uint32_t num_q_heads = 0;
  uint32_t num_kv_heads = 0;     // divides num_q_heads
  uint32_t head_dim = 0;         // multiple of 8, <= 256
  uint32_t num_full_slots = 0;   // full rows attended, >= 1
  uint32_t slot_stride = 0;      // rows per kv head of k, v and positions
  int32_t query_position = 0;    // RoPE position of the query
  uint32_t num_middle = 0;       // middle tokens (0: attention over the full rows only)
  uint32_t middle_stride = 0;    // rows per kv head of k_middle and v_middle
  uint32_t num_states = 0;       // N
  uint32_t window_length = 0;    // T >= 2N (Factorized)
  uint32_t k_compressed = 0;     // |D^kc| per kv head, < head_dim
  uint32_t v_compressed = 0;     // |D^vc|
  Dtype dtype = Dtype::F32;      // of q, k, v, the middle rows and out
  RopeParams rope;               // Fused route only
  FourierAttentionRoute route = FourierAttentionRoute::Fused;  // Vulkan's; the CPU has one
};

struct FourierAttentionArgs {
  View q;                                // [num_q_heads][head_dim], before RoPE
  View k, v;                             // [num_kv_heads][slot_stride][head_dim]
  View positions;                        // int32 [num_kv_heads][slot_stride]; RoPE only
  View turn_table;                       // rope_turn_table(rope); Vulkan with RoPE only
  View k_middle;                         // [num_kv_heads][middle_stride][head_dim - k_compressed], after RoPE
  View v_middle;                         // [num_kv_heads][middle_stride][head_dim - v_compressed]
  View k_dims, v_dims;                   // uint32 [num_kv_heads][head_dim]: compressed dims first
  View k_coefficients, v_coefficients;   // f32 [num_kv_heads][2N][k_compressed] (resp. v_compressed)
  View k_affine, v_affine;               // f32 [num_kv_heads][2][k_compressed] (resp. v_compressed)
  View out;                              // [num_q_heads][head_dim]
};

// Outside a submission, before the first Factorized call of this shape's num_q_heads and
// window_length: plans the transforms and keeps them while the handle lives (so none is made
// on the decode path). Null on the CPU.
std::shared_ptr<void> fourier_attention_prepare(Backend& backend, const FourierAttentionShape& shape);

void fourier_attention(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args);
// The reference materializes the middle (hippo_fourier_reconstruct_host), then attends as
// ops::attention_cpu does: a direct softmax with double accumulation.
void fourier_attention_cpu(const FourierAttentionShape& shape, const FourierAttentionArgs& args);
void fourier_attention_vulkan(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args);
std::shared_ptr<void> fourier_attention_prepare_vulkan(Backend& backend, const FourierAttentionShape& shape);

}  // namespace kvc::ops
