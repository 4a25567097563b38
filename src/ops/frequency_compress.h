// FreqKV's compression along the sequence axis, in place (FreqKV section 3.3, eq. 3, with
// appendix F.5's rescale): each column x (one head, one head dimension, in_length rows) becomes
// y = sqrt(L / N) * IDCT_L(DCT_N(x)[0 : L]) in its first L = out_length rows, orthonormal DCTs
// (appendix A, eq. 6 and 7). The R rows after them (N .. N+R-1, FreqKV's recent tokens kept
// whole) then move up to follow, to L .. L+R-1 (in the same dispatch on the FFT routes); rows
// L+R .. N+R-1 are left undefined. f32 arithmetic on the device, double on the CPU.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

struct FrequencyCompressShape {
  uint32_t num_heads = 0;
  uint32_t head_dim = 0;     // multiple of 8, <= 256
  uint32_t in_length = 0;    // N: rows compressed per head
  uint32_t out_length = 0;   // L: rows they become, 1 <= L < N
  uint32_t head_stride = 0;  // rows between one head's first row and the next's, >= N + R
  Dtype dtype = Dtype::F32;
  uint32_t recent_length = 0;  // R: rows after the N that move up to follow the L
};

// `states` points at head 0's first row; on Vulkan its offset is a multiple of 2 elements.
struct FrequencyCompressArgs {
  View states;
};

// Builds what the op needs for this shape on `backend` (the Vulkan route's tables), once per
// backend; call it outside a submission, before the first frequency_compress of the shape.
void frequency_compress_prepare(Backend& backend, const FrequencyCompressShape& shape);

void frequency_compress(Backend& backend, const FrequencyCompressShape& shape, const FrequencyCompressArgs& args);
void frequency_compress_cpu(const FrequencyCompressShape& shape, const FrequencyCompressArgs& args);
void frequency_compress_vulkan(Backend& backend, const FrequencyCompressShape& shape, const FrequencyCompressArgs& args);

// Which Vulkan route a shape takes on `backend` (a Vulkan one): the shared-memory FFT kernel,
// the same kernel with a chirp-z (Bluestein) convolution for a length with a prime factor above
// 31, or the dense matrix product (ops/sequence_transform.h). Exposed for tests and kvc-bench.
enum class FrequencyCompressRoute { Fft, Chirp, Dense };
FrequencyCompressRoute frequency_compress_route(const Backend& backend, const FrequencyCompressShape& shape);

}  // namespace kvc::ops
