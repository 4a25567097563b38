// FAEDKV's Infinite-Window DFT (its eq. 9): tokens leaving the recent window are folded into
// the kept DFT bins of a segment's state, oldest first. Eq. 9 for bin k of a length-M state S,
// with N the tokens folded so far (M right after the prompt, ../shared/DESIGN.md):
//   S <- W_k^{-1} ((N / (N + 1)) S + x / (N + 1)),   W_k^{-1} = e^{+2 pi i k / M},   N <- N + 1
// (the sign that keeps eq. 4's convention: the segment moves one place towards its start, its
// oldest point wraps to the end and the new token lands there; eq. 8 writes W_k against its own
// eq. 4). S is a running mean, so sum_k S[k] e^{+2 pi i k n / M} weighs every token alike.
// Stored is T = S e^{-2 pi i k (N - M) / M}, the same state in a frame that does not turn:
//   T <- (N / (N + 1)) T + x e^{-2 pi i k N / M} / (N + 1)
// with the phase k N mod M taken in integers, so a million folds drift by no rounding of a
// twiddle; the segment T describes is S's turned by N - M places, which attention (a sum over
// the segment) does not see, and kvc_cache_read undoes. The tokens sit in a ring of window
// slots: token i of the fold at slot ring_first_slot + (ring_start + i) % ring_slots.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

struct SpectralFoldShape {
  uint32_t num_heads = 0;
  uint32_t head_dim = 0;
  uint32_t slot_stride = 0;     // rows per head in k and v
  uint32_t num_bins = 0;        // stored bins per head
  uint32_t segment_length = 0;  // M, the state's DFT length
  uint64_t folded = 0;          // N before this fold, >= segment_length
  uint32_t num_tokens = 0;      // tokens folded now, <= ring_slots
  uint32_t ring_first_slot = 0;
  uint32_t ring_slots = 0;
  uint32_t ring_start = 0;      // < ring_slots
  Dtype dtype = Dtype::F32;     // of k and v
};

struct SpectralFoldArgs {
  View k, v;                     // [num_heads][slot_stride][head_dim]
  View bins;                     // uint32 [num_bins], each < M
  View spectrum_k, spectrum_v;   // f32 (re, im) [num_heads][num_bins][head_dim][2], updated in place
};

void spectral_fold(Backend& backend, const SpectralFoldShape& shape, const SpectralFoldArgs& args);
void spectral_fold_cpu(const SpectralFoldShape& shape, const SpectralFoldArgs& args);
// spectral_fold_cpu on host arrays: k, v and bins as in SpectralFoldArgs, the states updated.
void spectral_fold_host(const SpectralFoldShape& shape, const void* k, const void* v, const uint32_t* bins, float* spectrum_k,
                        float* spectrum_v);
void spectral_fold_vulkan(Backend& backend, const SpectralFoldShape& shape, const SpectralFoldArgs& args);

}  // namespace kvc::ops
