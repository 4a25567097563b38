// Decode attention over a FourierAttention layer (sec. 3.3, eq. 5; appendix D): one query
// token over the layer's full rows (sinks, local window and the query's own token) and its
// middle tokens, whose keys and values are rebuilt where they are used: uncompressed dims from
// packed runs, compressed dims as scale (F^T C) + offset (ops/hippo_fourier.h). Keys are held
// after RoPE (the paper compresses the cache as attention sees it), so nothing is rotated.
//
// Vulkan computes it factorized and never writes a rebuilt cache: the compressed dims' logits
// are F^T (C_k q~) + b, one DFT of 2N values per query head evaluated at the L middle tokens,
// and their values' share is C_v^T (F p), one DFT of the L probabilities at N bins (both VkFFT
// transforms of length T, two query heads per complex sequence since both signals are real):
// O(T log T + L |D^u|) per query head. Where T = R B with B the least power of two >= 2N (and
// a B-point run fits a workgroup's shared memory), the transforms are pruned to the 2N - 1
// bins they use: R short DFTs of B points in shared memory, O(T log B). The full rows go
// through flash-decoding's split (attention_decode), the middle's packed dims through their
// own split (shaders/fourier_middle_partials.comp), and attention_merge combines them.
// FlashFourierAttention's fused route (appendix D: each workgroup rebuilds tiles of middle
// tokens in shared memory and attends to them, O(L N' (|D^kc| + |D^vc|)) work) was built and
// measured first: 1.03 s per 32-layer step at 32K on the H100 against the factorized route's
// 17 ms (docs/benchmarks.md), so the "keep the faster" removed it.
//
// The packed middles are dim-major: each kept dim's run of middle_stride tokens is contiguous,
// so a decode kernel reads a token's dims, or a dim's tokens, in whole words.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

struct FourierAttentionShape {
  uint32_t num_q_heads = 0;
  uint32_t num_kv_heads = 0;     // divides num_q_heads
  uint32_t head_dim = 0;         // multiple of 8, <= 256
  uint32_t num_full_slots = 0;   // full rows attended, >= 1
  uint32_t slot_stride = 0;      // rows per kv head of k and v
  uint32_t num_middle = 0;       // middle tokens, at most window_length (0: attention over the full rows only)
  uint32_t middle_stride = 0;    // tokens per dim's run of k_middle and v_middle: a multiple of 8
  uint32_t num_states = 0;       // N
  uint32_t window_length = 0;    // T >= 2N
  uint32_t k_compressed = 0;     // |D^kc| per kv head, < head_dim
  uint32_t v_compressed = 0;     // |D^vc|
  Dtype dtype = Dtype::F32;      // of q, k, v, the middle runs and out
};

struct FourierAttentionArgs {
  View q;                                // [num_q_heads][head_dim]
  View k, v;                             // [num_kv_heads][slot_stride][head_dim], after RoPE
  View k_middle;                         // [num_kv_heads][head_dim - k_compressed][middle_stride], after RoPE
  View v_middle;                         // [num_kv_heads][head_dim - v_compressed][middle_stride]
  View k_dims, v_dims;                   // uint32 [num_kv_heads][head_dim]: compressed dims first
  View k_coefficients, v_coefficients;   // f32 [num_kv_heads][2N][k_compressed] (resp. v_compressed)
  View k_affine, v_affine;               // f32 [num_kv_heads][2][k_compressed] (resp. v_compressed)
  View out;                              // [num_q_heads][head_dim]
};

// Outside a submission, before the first call of this shape's num_q_heads, num_states and
// window_length: plans the transforms and keeps them while the handle lives (so none is made on
// the decode path). Null on the CPU and where the transforms need no plan.
std::shared_ptr<void> fourier_attention_prepare(Backend& backend, const FourierAttentionShape& shape);

void fourier_attention(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args);
// The reference materializes the middle (hippo_fourier_reconstruct_host), then attends as
// ops::attention_cpu does: a direct softmax with double accumulation.
void fourier_attention_cpu(const FourierAttentionShape& shape, const FourierAttentionArgs& args);
void fourier_attention_vulkan(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args);
// Whether fourier_attention_vulkan takes the pruned transforms for `shape` (false with no
// middle: no transforms at all; tests).
bool fourier_attention_pruned_vulkan(Backend& backend, const FourierAttentionShape& shape);
std::shared_ptr<void> fourier_attention_prepare_vulkan(Backend& backend, const FourierAttentionShape& shape);

}  // namespace kvc::ops
