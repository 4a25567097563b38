// A linear map along the sequence axis: out[h][r][d] = sum_n matrix[r][n] * in[h][n][d], for
// every head h and head dimension d. With the matrices of ops/dct_matrix.h it is the
// orthonormal DCT-II, the DCT-III (its inverse) and FreqKV's fused compression (FreqKV eq. 3:
// DCT, keep the lowest components, IDCT, rescale), for any length. f32 accumulation.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

struct SequenceTransformShape {
  uint32_t num_heads = 0;
  uint32_t head_dim = 0;         // multiple of 8, <= 256
  uint32_t in_length = 0;        // rows read per head (the matrix's columns)
  uint32_t out_length = 0;       // rows written per head (the matrix's rows)
  uint32_t in_head_stride = 0;   // rows between one head's first input row and the next's
  uint32_t out_head_stride = 0;  // the same for the output
  Dtype dtype = Dtype::F32;      // of in and out
};

// `in` and `out` point at head 0's first row and must not overlap; matrix is f32
// [out_length][in_length] on the same backend.
struct SequenceTransformArgs {
  View in;
  View matrix;
  View out;
};

void sequence_transform(Backend& backend, const SequenceTransformShape& shape, const SequenceTransformArgs& args);
void sequence_transform_cpu(const SequenceTransformShape& shape, const SequenceTransformArgs& args);
void sequence_transform_vulkan(Backend& backend, const SequenceTransformShape& shape, const SequenceTransformArgs& args);

}  // namespace kvc::ops
