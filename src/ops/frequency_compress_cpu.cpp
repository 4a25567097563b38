// The CPU reference: the two cosine sums of eq. 6 and 7 written out, in double, O(N L + L^2)
// per column. Angles pi j / 2N come from a table of 4N cosines indexed by j mod 4N, exact
// integer reduction, so long transforms lose no precision to large arguments.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/frequency_compress.h"

namespace kvc::ops {
namespace {

// cos(pi j / (2 length)) for j in [0, 4 length).
std::vector<double> quarter_cosines(uint32_t length) {
  std::vector<double> table(size_t(4) * length);
  for (size_t j = 0; j < table.size(); ++j) table[j] = std::cos(M_PI * static_cast<double>(j) / (2.0 * length));
  return table;
}

}  // namespace

void frequency_compress_cpu(const FrequencyCompressShape& shape, const FrequencyCompressArgs& args) {
  const uint32_t n = shape.in_length, l = shape.out_length;
  const size_t dim = shape.head_dim;
  const std::vector<double> cos_in = quarter_cosines(n), cos_out = quarter_cosines(l);
  void* states = args.states.host<void>();
  std::vector<double> rows(size_t(n) * dim), coefficients(size_t(l) * dim);
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    const size_t base = size_t(head) * shape.head_stride * dim;
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = load_element(states, shape.dtype, base + i);
    // sqrt(L/N) alpha_t(N) alpha_t(L) = 1/N for t = 0 and 2/N above: the product of eq. 3's
    // rescale and the two orthonormal weights.
    for (uint32_t t = 0; t < l; ++t) {
      double* out = &coefficients[size_t(t) * dim];
      std::fill(out, out + dim, 0.0);
      for (uint32_t k = 0; k < n; ++k) {
        const double c = cos_in[(uint64_t(t) * (2 * k + 1)) % (4 * uint64_t(n))];
        for (size_t d = 0; d < dim; ++d) out[d] += c * rows[k * dim + d];
      }
      const double weight = (t == 0 ? 1.0 : 2.0) / n;
      for (size_t d = 0; d < dim; ++d) out[d] *= weight;
    }
    for (uint32_t m = 0; m < l; ++m) {
      double* out = &rows[size_t(m) * dim];  // row m's inputs were consumed above
      std::fill(out, out + dim, 0.0);
      for (uint32_t t = 0; t < l; ++t) {
        const double c = cos_out[(uint64_t(t) * (2 * m + 1)) % (4 * uint64_t(l))];
        for (size_t d = 0; d < dim; ++d) out[d] += c * coefficients[t * dim + d];
      }
      for (size_t d = 0; d < dim; ++d) store_element(states, shape.dtype, base + m * dim + d, static_cast<float>(out[d]));
    }
    const size_t row_bytes = dim * dtype_size(shape.dtype);
    unsigned char* head_first = static_cast<unsigned char*>(states) + base * dtype_size(shape.dtype);
    std::memmove(head_first + l * row_bytes, head_first + size_t(n) * row_bytes, shape.recent_length * row_bytes);
  }
}

void frequency_compress(Backend& backend, const FrequencyCompressShape& shape, const FrequencyCompressArgs& args) {
  require(shape.out_length >= 1 && shape.out_length < shape.in_length &&
              uint64_t(shape.head_stride) >= uint64_t(shape.in_length) + shape.recent_length &&
              shape.head_dim % 8 == 0 && shape.head_dim >= 8 && shape.head_dim <= 256 && shape.num_heads >= 1,
          KVC_ERROR_INTERNAL, "frequency_compress: shape out of range (1 <= L < N, N + R <= head_stride, head_dim 8..256 step 8)");
  if (backend.is_cpu()) frequency_compress_cpu(shape, args);
  else frequency_compress_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
