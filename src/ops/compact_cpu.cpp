#include <cstring>

#include "ops/compact.h"

namespace kvc::ops {

void compact_cpu(const CompactShape& shape, const CompactArgs& args) {
  const size_t row_bytes = size_t(shape.head_dim) * dtype_size(shape.dtype);
  const uint32_t* indices = args.indices.host<uint32_t>();
  const uint32_t kept = shape.num_selected + shape.tail_length;
  for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head) {
    const size_t base = size_t(kv_head) * shape.slot_stride, out_base = size_t(kv_head) * shape.out_slot_stride;
    for (uint32_t slot = 0; slot < kept; ++slot) {
      const uint32_t source = slot < shape.num_selected ? indices[size_t(kv_head) * shape.index_stride + slot]
                                                        : shape.tail_first + (slot - shape.num_selected);
      std::memcpy(args.k_out.host<unsigned char>() + (out_base + slot) * row_bytes, args.k.host<unsigned char>() + (base + source) * row_bytes, row_bytes);
      std::memcpy(args.v_out.host<unsigned char>() + (out_base + slot) * row_bytes, args.v.host<unsigned char>() + (base + source) * row_bytes, row_bytes);
      args.positions_out.host<int32_t>()[out_base + slot] = args.positions.host<int32_t>()[base + source];
    }
  }
}

void compact(Backend& backend, const CompactShape& shape, const CompactArgs& args) {
  if (backend.is_cpu()) compact_cpu(shape, args);
  else compact_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
