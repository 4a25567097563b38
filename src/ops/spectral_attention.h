// Attention over a cache whose middle lives as kept DFT bins (FAEDKV, its eq. 13): the slots
// held in the time domain (sinks and recent window) plus a segment of M tokens, each the
// reconstruction
//   x[n] = sum_{kept k} S[k] e^{+2 pi i k n / M} = sum_{stored b} w_b Re(S[b] e^{+2 pi i k_b n / M})
// where a stored bin stands for itself and its mirror M - k (w = 2; w = 1 for k = 0 and M/2).
// The segment is never rebuilt: its scores are the inverse DFT of the per-bin products
// S_K[k] . q, and its value sum is sum_b w_b Re(S_V[b] conj(P[k_b])) with P the forward DFT of
// its probabilities; both are linear, so the result equals plain attention over the rebuilt
// segment. Every segment token is older than the queries; a held slot is visible to query i
// when its position is at most the query's (the window is a ring, so slot order says
// nothing), except excluded_slot, which attention skips. With fold_excluded, that slot holds a
// token that left the window but is not in the bins yet: attention first folds it into both
// tables as their N = folded-th token (ops/spectral_fold.h's eq. 9; spectrum_k and spectrum_v
// are updated in place), reading them once for both. No RoPE: FAEDKV transforms keys as the
// model stores them. Softmax scale 1/sqrt(head_dim), f32 accumulation.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "common/dtype.h"
#include "ops/bin_span.h"

namespace kvc::ops {

constexpr uint32_t kNoSlot = 0xFFFFFFFFu;

struct SpectralAttentionShape {
  uint32_t num_q_heads = 0;
  uint32_t num_kv_heads = 0;      // divides num_q_heads
  uint32_t head_dim = 0;          // multiple of 8, <= 256
  uint32_t num_queries = 0;       // >= 1
  uint32_t num_slots = 0;         // time-domain slots held
  uint32_t slot_stride = 0;
  int32_t first_query_position = 0;  // query i is the token at this position + i
  uint32_t num_bins = 0;          // stored bins per kv head
  uint32_t segment_length = 0;    // M >= 1
  Dtype dtype = Dtype::F32;       // of q, k, v and out
  BinSpan span;                   // Vulkan: mirrored_bin_span(bins, M), or count 0 (any bins)
  uint32_t excluded_slot = kNoSlot;  // a held slot attention skips
  bool fold_excluded = false;        // fold excluded_slot's token into the bins first
  uint64_t folded = 0;               // N before that fold (>= M), when fold_excluded
};

struct SpectralAttentionArgs {
  View q;                        // [num_queries][num_q_heads][head_dim]
  View k, v;                     // [num_kv_heads][slot_stride][head_dim]
  View positions;                // int32 [num_kv_heads][slot_stride]
  View bins;                     // uint32 [num_bins], each <= M / 2
  View bin_map;                  // spectral_bin_map(bins, M) (Vulkan only)
  View spectrum_k, spectrum_v;   // f32 (re, im) [num_kv_heads][num_bins][head_dim][2], folded into with fold_excluded
  View out;                      // [num_queries][num_q_heads][head_dim]
};

// The weight of a stored bin: 1 for k = 0 and k = M/2, which are their own mirrors, else 2.
inline double spectral_bin_weight(uint32_t bin, uint32_t segment_length) {
  return bin == 0 || 2 * uint64_t(bin) == segment_length ? 1.0 : 2.0;
}

// For every bin k < M of the full spectrum: the index b of the stored bin it is (b), or whose
// mirror it is (b | 0x80000000: the conjugate), or 0xFFFFFFFF for a pruned bin.
std::vector<uint32_t> spectral_bin_map(const std::vector<uint32_t>& bins, uint32_t segment_length);

// The segment the stored bins describe: f32 [num_heads][M][head_dim], in double.
std::vector<float> spectral_reconstruct_cpu(uint32_t num_heads, uint32_t head_dim, uint32_t segment_length,
                                            const std::vector<uint32_t>& bins, const float* spectrum);

// What the Vulkan route needs for segments of M tokens whose bins lie in `span` (a plan of the
// padded length and the chirp filter: ops/chirp_z_vulkan.h), kept while the handle lives: a
// cache holding one makes nothing on its decode path. Null on the CPU.
std::shared_ptr<void> spectral_attention_keep(Backend& backend, uint32_t segment_length, BinSpan span, uint32_t num_q_heads);
std::shared_ptr<void> spectral_attention_keep_vulkan(Backend& backend, uint32_t segment_length, BinSpan span, uint32_t num_q_heads);

void spectral_attention(Backend& backend, const SpectralAttentionShape& shape, const SpectralAttentionArgs& args);
void spectral_attention_cpu(const SpectralAttentionShape& shape, const SpectralAttentionArgs& args);
void spectral_attention_vulkan(Backend& backend, const SpectralAttentionShape& shape, const SpectralAttentionArgs& args);

}  // namespace kvc::ops
