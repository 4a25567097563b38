#include <cstring>

#include "ops/append_rows.h"

namespace kvc::ops {

void append_rows_cpu(const AppendRowsShape& shape, const AppendRowsArgs& args) {
  const size_t row_bytes = size_t(shape.head_dim) * dtype_size(shape.dtype);
  for (uint32_t token = 0; token < shape.num_tokens; ++token)
    for (uint32_t head = 0; head < shape.num_kv_heads; ++head) {
      const size_t from = (size_t(shape.source_token + token) * shape.num_kv_heads + head) * row_bytes;
      const size_t slot = size_t(head) * shape.slot_stride + shape.first_slot + token;
      std::memcpy(args.k_cache.host<unsigned char>() + slot * row_bytes, args.k.host<unsigned char>() + from, row_bytes);
      std::memcpy(args.v_cache.host<unsigned char>() + slot * row_bytes, args.v.host<unsigned char>() + from, row_bytes);
      args.positions.host<int32_t>()[slot] = shape.first_position + int32_t(token);
    }
}

void append_rows(Backend& backend, const AppendRowsShape& shape, const AppendRowsArgs& args) {
  if (backend.is_cpu()) append_rows_cpu(shape, args);
  else append_rows_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
