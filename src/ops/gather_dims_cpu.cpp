#include "ops/gather_dims.h"

#include <string>

namespace kvc::ops {

void gather_dims_cpu(const GatherDimsShape& shape, const GatherDimsArgs& args) {
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    const uint32_t* dims = args.dims.host<uint32_t>() + size_t(head) * shape.dims_row + shape.first_dim;
    for (uint32_t i = 0; i < shape.num_rows; ++i) {
      const size_t in_row = (size_t(head) * shape.in_slot_stride + shape.in_first_slot + i) * shape.in_row_elements;
      for (uint32_t u = 0; u < shape.num_dims; ++u) {
        const size_t at = shape.out_dim_major
                              ? (size_t(head) * shape.num_dims + u) * shape.out_slot_stride + shape.out_first_slot + i
                              : (size_t(head) * shape.out_slot_stride + shape.out_first_slot + i) * shape.num_dims + u;
        store_element(args.out.host<void>(), shape.out_dtype, at, load_element(args.in.host<void>(), shape.in_dtype, in_row + dims[u]));
      }
    }
  }
}

void gather_dims(Backend& backend, const GatherDimsShape& shape, const GatherDimsArgs& args) {
  require(!shape.out_dim_major || shape.out_dtype != Dtype::F16 || shape.out_slot_stride % 2 == 0, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "gather_dims: a dim-major f16 output needs an even slot stride, so no word holds two dims' runs (" +
           std::to_string(shape.out_slot_stride) + ")";
  });
  if (backend.is_cpu()) gather_dims_cpu(shape, args);
  else gather_dims_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
