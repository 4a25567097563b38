#include "ops/gather_dims.h"

namespace kvc::ops {

void gather_dims_cpu(const GatherDimsShape& shape, const GatherDimsArgs& args) {
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    const uint32_t* dims = args.dims.host<uint32_t>() + size_t(head) * shape.dims_row + shape.first_dim;
    for (uint32_t i = 0; i < shape.num_rows; ++i) {
      const size_t in_row = (size_t(head) * shape.in_slot_stride + shape.in_first_slot + i) * shape.in_row_elements;
      const size_t out_row = (size_t(head) * shape.out_slot_stride + shape.out_first_slot + i) * shape.num_dims;
      for (uint32_t u = 0; u < shape.num_dims; ++u)
        store_element(args.out.host<void>(), shape.out_dtype, out_row + u,
                      load_element(args.in.host<void>(), shape.in_dtype, in_row + dims[u]));
    }
  }
}

void gather_dims(Backend& backend, const GatherDimsShape& shape, const GatherDimsArgs& args) {
  if (backend.is_cpu()) gather_dims_cpu(shape, args);
  else gather_dims_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
