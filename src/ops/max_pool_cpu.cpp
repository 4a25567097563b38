#include <algorithm>

#include "ops/max_pool.h"

namespace kvc::ops {

void max_pool_cpu(const MaxPoolShape& shape, const MaxPoolArgs& args) {
  const uint32_t radius = shape.kernel_size / 2;
  const float* in = args.in.host<float>();
  float* out = args.out.host<float>();
  for (uint32_t row = 0; row < shape.num_rows; ++row) {
    const size_t base = size_t(row) * shape.row_length;
    for (uint32_t i = 0; i < shape.row_length; ++i) {
      const uint32_t first = i > radius ? i - radius : 0;
      const uint32_t last = std::min(shape.row_length - 1, i + radius);
      out[base + i] = *std::max_element(in + base + first, in + base + last + 1);
    }
  }
}

void max_pool(Backend& backend, const MaxPoolShape& shape, const MaxPoolArgs& args) {
  if (backend.is_cpu()) max_pool_cpu(shape, args);
  else max_pool_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
