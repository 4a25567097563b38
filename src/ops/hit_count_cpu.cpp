#include <algorithm>

#include "ops/hit_count.h"

namespace kvc::ops {

void hit_count_cpu(const HitCountShape& shape, const HitCountArgs& args) {
  const uint32_t* indices = args.indices.host<uint32_t>();
  uint32_t* counts = args.counts.host<uint32_t>();
  std::fill(counts, counts + size_t(shape.num_kv_heads) * shape.num_keys, 0u);
  for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head)
    for (uint32_t row = 0; row < shape.rows_per_kv_head; ++row) {
      const uint32_t* named = indices + (size_t(kv_head) * shape.rows_per_kv_head + row) * shape.index_stride;
      for (uint32_t i = 0; i < shape.hits_per_row; ++i) ++counts[size_t(kv_head) * shape.num_keys + named[i]];
    }
}

void hit_count(Backend& backend, const HitCountShape& shape, const HitCountArgs& args) {
  if (backend.is_cpu()) hit_count_cpu(shape, args);
  else hit_count_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
