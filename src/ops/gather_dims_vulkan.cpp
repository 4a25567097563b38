#include <algorithm>

#include "ops/gather_dims.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;  // threads, one output word each per step
constexpr uint32_t kMaxGroups = 65535;    // the least maxComputeWorkGroupCount[0]; the shader loops past it

struct GatherDimsPush {
  uint32_t in_row_elements, in_slot_stride, in_first_slot, num_rows, dims_row, first_dim, num_dims, out_slot_stride,
      out_first_slot;
};

}  // namespace

void gather_dims_vulkan(Backend& backend, const GatherDimsShape& shape, const GatherDimsArgs& args) {
  const GatherDimsPush push{shape.in_row_elements, shape.in_slot_stride, shape.in_first_slot,  shape.num_rows,
                            shape.dims_row,        shape.first_dim,      shape.num_dims,       shape.out_slot_stride,
                            shape.out_first_slot};
  // Words written (the shader loops past the grid): + 1 for a straddled f16 word at each end of
  // the head's region, or (dim-major) + 2 for each dim's run.
  const uint32_t per_word = shape.out_dtype == Dtype::F16 ? 2 : 1;
  const uint64_t words = shape.out_dim_major ? uint64_t(shape.num_rows / per_word + 2) * shape.num_dims
                                             : uint64_t(shape.num_rows) * shape.num_dims + 1;
  backend.recorder().dispatch(
      {"gather_dims", 3, sizeof(GatherDimsPush),
       {kWorkgroupSize, shape.in_dtype == Dtype::F16, shape.out_dtype == Dtype::F16, shape.out_dim_major}},
      {slice(args.in), slice(args.dims), slice(args.out)}, &push,
      std::min(group_count_unbounded(words, kWorkgroupSize), kMaxGroups), shape.num_heads);
}

}  // namespace kvc::ops
