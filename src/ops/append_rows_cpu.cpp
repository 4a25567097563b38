#include <cstring>
#include <vector>

#include "ops/append_rows.h"

namespace kvc::ops {

void append_rows_cpu(const AppendRowsShape& shape, const AppendRowsArgs& args) {
  const size_t row_bytes = size_t(shape.head_dim) * dtype_size(shape.dtype);
  const std::vector<double> inv_freq = shape.rope.enabled() ? rope_inverse_frequencies(shape.rope) : std::vector<double>();
  std::vector<float> key(shape.head_dim);
  for (uint32_t token = 0; token < shape.num_tokens; ++token)
    for (uint32_t head = 0; head < shape.num_kv_heads; ++head) {
      const size_t from = (size_t(shape.source_token + token) * shape.num_kv_heads + head) * row_bytes;
      const size_t slot = size_t(head) * shape.slot_stride + shape.first_slot + token;
      const int32_t position = shape.first_position + int32_t(token);
      unsigned char* k_to = args.k_cache.host<unsigned char>() + slot * row_bytes;
      const unsigned char* k_from = args.k.host<unsigned char>() + from;
      if (shape.rope.enabled()) {
        for (uint32_t d = 0; d < shape.head_dim; ++d) key[d] = load_element(k_from, shape.dtype, d);
        rope_rotate_row(shape.rope, inv_freq, key.data(), position);
        for (uint32_t d = 0; d < shape.head_dim; ++d) store_element(k_to, shape.dtype, d, key[d]);
      } else {
        std::memcpy(k_to, k_from, row_bytes);
      }
      std::memcpy(args.v_cache.host<unsigned char>() + slot * row_bytes, args.v.host<unsigned char>() + from, row_bytes);
      args.positions.host<int32_t>()[slot] = position;
    }
}

void append_rows(Backend& backend, const AppendRowsShape& shape, const AppendRowsArgs& args) {
  if (backend.is_cpu()) append_rows_cpu(shape, args);
  else append_rows_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
