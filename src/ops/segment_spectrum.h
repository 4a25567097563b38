// The DFT along the sequence of a segment of cache rows, at chosen bins: for every head h and
// head dim d,
//   X[h][b][d] = sum_{n < length} x[h][first_slot + n][d] e^{-2 pi i bins[b] (window_offset + n) / T}
// with T = transform_length: the segment placed at window_offset in a zero-padded window of T
// points. FAEDKV (its eq. 10: the prompt's middle segment, T = its length) and FourierAttention
// (eq. 4: the first N bins of a length-T DFT) start from it; every output is times `scale`.
// Vulkan: head by head, two head dims packed as one complex sequence (re = dim 2j, im = dim 2j + 1), one
// VkFFT of length T for all of them, and the two real spectra separated at the chosen bins
// (X_a[k] = (Z[k] + conj Z[T-k]) / 2, X_b[k] = (Z[k] - conj Z[T-k]) / 2i), so a real
// transform costs half a complex one at any T. With chirp_z the length-T DFT is a chirp-z
// transform over a plan of f * 2^a points, f = 1, 3, 5 or 7 (ops/chirp_z_vulkan.h), its chirps
// taken in the pack and unpack passes: for T that change with every prompt (FAEDKV's M), which would each
// need a plan; its plan holds T + span - 1 points where the bins and their mirrors lie in a span.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "common/dtype.h"
#include "ops/bin_span.h"

namespace kvc::ops {

struct SegmentSpectrumShape {
  uint32_t num_heads = 0;
  uint32_t head_dim = 0;          // even
  uint32_t slot_stride = 0;       // rows per head in `states`
  uint32_t first_slot = 0;
  uint32_t length = 0;            // rows of the segment, >= 1
  uint32_t transform_length = 0;  // T >= window_offset + length
  uint32_t window_offset = 0;
  uint32_t num_bins = 0;          // >= 1, each bin < T
  Dtype dtype = Dtype::F32;       // of states
  float scale = 1.0f;             // FAEDKV's state is a mean: 1 / M
  bool chirp_z = false;           // Vulkan: through chirp-z plans (the CPU computes the formula)
  BinSpan span;                   // chirp_z: a run holding every bin and its mirror T - k (count 0: all)
};

struct SegmentSpectrumArgs {
  View states;    // [num_heads][slot_stride][head_dim]
  View bins;      // uint32 [num_bins]
  View spectrum;  // f32 (re, im) [num_heads][num_bins][head_dim][2]
};

// What the Vulkan route needs for `shape` (its plan; with chirp_z, its chirp filter too), made
// now and kept while the handle lives; null on the CPU.
std::shared_ptr<void> segment_spectrum_keep(Backend& backend, const SegmentSpectrumShape& shape);
std::shared_ptr<void> segment_spectrum_keep_vulkan(Backend& backend, const SegmentSpectrumShape& shape);

void segment_spectrum(Backend& backend, const SegmentSpectrumShape& shape, const SegmentSpectrumArgs& args);
void segment_spectrum_cpu(const SegmentSpectrumShape& shape, const SegmentSpectrumArgs& args);
void segment_spectrum_vulkan(Backend& backend, const SegmentSpectrumShape& shape, const SegmentSpectrumArgs& args);

}  // namespace kvc::ops
