// Chosen dims of a range of rows, packed: out[h][out_first_slot + i][u] =
// in[h][in_first_slot + i][dims[h][first_dim + u]] for i < num_rows, u < num_dims, converting
// between dtypes. FourierAttention (sec. 3.3, eq. 2) keeps the uncompressed dims of the middle
// tokens this way, and its dim choice (sec. 3.4) picks coefficient columns with it.
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
};

struct GatherDimsArgs {
  View in;    // [num_heads][in_slot_stride][in_row_elements]
  View dims;  // uint32 [num_heads][dims_row], entries < in_row_elements
  View out;   // [num_heads][out_slot_stride][num_dims]; elements outside the rows written keep their values
};

void gather_dims(Backend& backend, const GatherDimsShape& shape, const GatherDimsArgs& args);
void gather_dims_cpu(const GatherDimsShape& shape, const GatherDimsArgs& args);
void gather_dims_vulkan(Backend& backend, const GatherDimsShape& shape, const GatherDimsArgs& args);

}  // namespace kvc::ops
