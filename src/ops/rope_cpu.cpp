#include <cmath>

#include "ops/rope.h"

namespace kvc::ops {

std::vector<double> rope_inverse_frequencies(const RopeParams& rope) {
  std::vector<double> inv_freq(rope.rotary_dims / 2);
  for (uint32_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(rope.theta, -2.0 * i / static_cast<double>(rope.rotary_dims));
  return inv_freq;
}

std::vector<uint32_t> rope_turn_table(const RopeParams& rope) {
  const std::vector<double> inv_freq = rope_inverse_frequencies(rope);
  std::vector<uint32_t> table(2 * inv_freq.size());
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double turns = inv_freq[i] / (2.0 * M_PI);  // < 1: at most 1/(2 pi) turn per position
    const double scaled_hi = std::ldexp(turns, 32);
    const double hi = std::floor(scaled_hi);
    table[2 * i] = static_cast<uint32_t>(hi);
    table[2 * i + 1] = static_cast<uint32_t>(std::llround(std::ldexp(scaled_hi - hi, 32)) & 0xffffffffu);
  }
  return table;
}

void rope_rotate_row(const RopeParams& rope, const std::vector<double>& inv_freq, float* row, int64_t position) {
  for (uint32_t pair = 0; pair < inv_freq.size(); ++pair) {
    uint32_t first, second;
    rope_pair_dims(rope, pair, first, second);
    const double angle = std::fmod(static_cast<double>(position) * inv_freq[pair], 2.0 * M_PI);
    const double c = std::cos(angle), s = std::sin(angle);
    const double x0 = row[first], x1 = row[second];
    row[first] = static_cast<float>(x0 * c - x1 * s);
    row[second] = static_cast<float>(x0 * s + x1 * c);
  }
}

void rope_cpu(const RopeShape& shape, const RopeArgs& args) {
  const std::vector<double> inv_freq = shape.rope.enabled() ? rope_inverse_frequencies(shape.rope) : std::vector<double>();
  const size_t row_elements = shape.head_dim;
  const int32_t* positions = shape.rope.enabled() ? args.positions.host<int32_t>() : nullptr;
  void* out = args.out.host<void>();
  const void* in = args.in.host<void>();
  std::vector<float> row(row_elements);
  for (uint32_t token = 0; token < shape.num_tokens; ++token) {
    for (uint32_t head = 0; head < shape.num_heads; ++head) {
      const size_t base = (size_t(token) * shape.num_heads + head) * row_elements;
      for (size_t d = 0; d < row_elements; ++d) row[d] = load_element(in, shape.dtype, base + d);
      if (shape.rope.enabled()) rope_rotate_row(shape.rope, inv_freq, row.data(), positions[token]);
      for (size_t d = 0; d < row_elements; ++d) store_element(out, shape.out_dtype, base + d, row[d] * shape.out_scale);
    }
  }
}

void rope(Backend& backend, const RopeShape& shape, const RopeArgs& args) {
  if (backend.is_cpu()) rope_cpu(shape, args);
  else rope_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
