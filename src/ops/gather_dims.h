// Chosen dims of a range of rows, packed: out[h][out_first_slot + i][u] =
// in[h][in_first_slot + i][dims[h][first_dim + u]] for i < num_rows, u < num_dims, converting
// between dtypes; or, dim-major, out[h][u][out_first_slot + i]. FourierAttention (sec. 3.3,
// eq. 2) keeps the uncompressed dims of the middle tokens dim-major (each dim's run of tokens
// contiguous, which its decode kernel reads in whole words: ops/fourier_attention.h), and its
// dim choice (sec. 3.4) picks coefficient columns row-major.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

struct GatherDimsShape {
  uint32_t num_heads = 0;
  uint32_t in_row_elements = 0;  // elements per row of `in`
  uint32_t in_slot_stride = 0;   // rows per head of `in`
  uint32_t in_first_slot = 0;
  uint32_t num_rows = 0;
  uint32_t dims_row = 0;         // entries per head of `dims`
  uint32_t first_dim = 0;        // the first entry of each head's dims row used
  uint32_t num_dims = 0;         // elements per row of `out`
  uint32_t out_slot_stride = 0;  // rows per head of `out`
  uint32_t out_first_slot = 0;
  Dtype in_dtype = Dtype::F32;
  Dtype out_dtype = Dtype::F32;
  bool out_dim_major = false;    // out is [num_heads][num_dims][out_slot_stride]; f16: out_slot_stride even
};

struct GatherDimsArgs {
  View in;    // [num_heads][in_slot_stride][in_row_elements]
  View dims;  // uint32 [num_heads][dims_row], entries < in_row_elements
  View out;   // [num_heads][out_slot_stride][num_dims] (or dim-major); elements outside the rows written keep their values
};

void gather_dims(Backend& backend, const GatherDimsShape& shape, const GatherDimsArgs& args);
void gather_dims_cpu(const GatherDimsShape& shape, const GatherDimsArgs& args);
void gather_dims_vulkan(Backend& backend, const GatherDimsShape& shape, const GatherDimsArgs& args);

}  // namespace kvc::ops
