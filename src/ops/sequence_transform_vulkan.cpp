// Vulkan sequence transform: one tiled matrix-product kernel for every length.
//
// FreqKV's compression uses it (with ops/dct_matrix.h's fused matrix) only for the lengths
// its FFT route cannot take (ops/frequency_compress_vulkan.cpp): L * N multiply-adds per
// column, 2.7e11 per K or V for 32 layers x 8 kv heads x head_dim 128 at Llama-2's window
// (L = 2046, N = 4092), 26.5 ms on the H100 against the step's 0.28 ms memory floor.
#include <algorithm>

#include "ops/sequence_transform.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kRowTile = 64;        // ROW_TILE in the shader
constexpr uint32_t kRowsPerThread = 4;   // ROWS_PER_THREAD in the shader
constexpr uint32_t kMaxDimTile = 64;

struct TransformPush {
  uint32_t in_length, out_length, in_head_elements, out_head_elements, in_first, out_first;
};

}  // namespace

void sequence_transform_vulkan(Backend& backend, const SequenceTransformShape& shape, const SequenceTransformArgs& args) {
  const uint32_t element_bytes = static_cast<uint32_t>(dtype_size(shape.dtype));
  require(args.in.offset % element_bytes == 0 && args.out.offset % (2 * element_bytes) == 0, KVC_ERROR_INTERNAL,
          "sequence_transform: views must start on an element (the output on an even one)");
  const uint32_t dim_tile = std::min(kMaxDimTile, shape.head_dim);
  const uint32_t threads = (kRowTile / kRowsPerThread) * (dim_tile / 4);
  const vk::KernelSpec spec{"sequence_transform", 3, sizeof(TransformPush),
                            {threads, shape.head_dim, dim_tile, shape.dtype == Dtype::F16}};
  // In and out bind from their tensors' start (descriptor offsets must be aligned); the push
  // constants say where head 0's first row is.
  const TransformPush push{shape.in_length,
                           shape.out_length,
                           shape.in_head_stride * shape.head_dim,
                           shape.out_head_stride * shape.head_dim,
                           static_cast<uint32_t>(args.in.offset / element_bytes),
                           static_cast<uint32_t>(args.out.offset / element_bytes)};
  backend.recorder().dispatch(spec, {slice(View{args.in.tensor, 0}), slice(args.matrix), slice(View{args.out.tensor, 0})}, &push,
                              group_count(shape.out_length, kRowTile), (shape.head_dim + dim_tile - 1) / dim_tile,
                              shape.num_heads);
}

}  // namespace kvc::ops
