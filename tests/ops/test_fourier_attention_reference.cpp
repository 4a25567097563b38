// The CPU FourierAttention decode against eq. 5 written out: middle rows rebuilt by the formula
// (affine map of F^T C in long double, the packed dims as stored, dim-major), then
// softmax(q k^T / sqrt(d)) v by formula over the full rows and the middle.
#include <doctest/doctest.h>

#include <string>

#include "support/formulas.h"
#include "support/fourier_case.h"
#include "support/test_support.h"

namespace kvc {
namespace {

// [kv][num_middle][d]: the middle rows eq. 5 and appendix D give.
std::vector<float> middle_by_formula(const test::FourierCase& c, const std::vector<float>& packed, const std::vector<uint32_t>& dims,
                                     const std::vector<float>& coefficients, const std::vector<float>& affine, uint32_t compressed) {
  const ops::FourierAttentionShape& shape = c.shape;
  const uint32_t dim = shape.head_dim, kept = dim - compressed;
  std::vector<float> rows(size_t(shape.num_kv_heads) * shape.num_middle * dim);
  for (uint32_t head = 0; head < shape.num_kv_heads; ++head) {
    for (uint32_t j = 0; j < compressed; ++j) {
      std::vector<long double> column(2 * shape.num_states);
      for (size_t r = 0; r < column.size(); ++r) column[r] = coefficients[(size_t(head) * column.size() + r) * compressed + j];
      const std::vector<long double> inverse = test::fourier_inverse_by_formula(column, shape.num_middle, 0, shape.window_length);
      const long double scale = affine[size_t(head) * 2 * compressed + j], offset = affine[(size_t(head) * 2 + 1) * compressed + j];
      for (uint32_t t = 0; t < shape.num_middle; ++t)
        rows[(size_t(head) * shape.num_middle + t) * dim + dims[size_t(head) * dim + j]] = static_cast<float>(scale * inverse[t] + offset);
    }
    for (uint32_t u = 0; u < kept; ++u)
      for (uint32_t t = 0; t < shape.num_middle; ++t)
        rows[(size_t(head) * shape.num_middle + t) * dim + dims[size_t(head) * dim + compressed + u]] =
            packed[(size_t(head) * kept + u) * shape.middle_stride + t];
  }
  return rows;
}

}  // namespace

TEST_CASE("fourier_attention_cpu is attention over the full rows and the middle rebuilt by eq. 5") {
  const ops::FourierAttentionShape shapes[] = {
      {6, 2, 24, 7, 0, 37, 0, 13, 257, 17, 20, Dtype::F32},
      {3, 3, 16, 5, 0, 20, 0, 5, 64, 1, 15, Dtype::F16},
  };
  for (const ops::FourierAttentionShape& base : shapes) {
    const test::FourierCase c = test::FourierCase::random(base);
    const ops::FourierAttentionShape& shape = c.shape;
    const std::vector<float> got = c.run(test::cpu_backend());

    const uint32_t dim = shape.head_dim, total = shape.num_full_slots + shape.num_middle;
    const std::vector<float> middle_k = middle_by_formula(c, c.k_middle, c.k_dims, c.k_coefficients, c.k_affine, shape.k_compressed);
    const std::vector<float> middle_v = middle_by_formula(c, c.v_middle, c.v_dims, c.v_coefficients, c.v_affine, shape.v_compressed);
    std::vector<float> keys(size_t(shape.num_kv_heads) * total * dim), values(keys.size());
    for (uint32_t kv = 0; kv < shape.num_kv_heads; ++kv)
      for (uint32_t slot = 0; slot < total; ++slot) {
        std::vector<float> key(dim), value(dim);
        if (slot < shape.num_full_slots) {
          const size_t row = size_t(kv) * shape.slot_stride + slot;
          key.assign(c.k.begin() + row * dim, c.k.begin() + (row + 1) * dim);
          value.assign(c.v.begin() + row * dim, c.v.begin() + (row + 1) * dim);
        } else {
          const size_t row = size_t(kv) * shape.num_middle + slot - shape.num_full_slots;
          key.assign(middle_k.begin() + row * dim, middle_k.begin() + (row + 1) * dim);
          value.assign(middle_v.begin() + row * dim, middle_v.begin() + (row + 1) * dim);
        }
        std::copy(key.begin(), key.end(), keys.begin() + (size_t(kv) * total + slot) * dim);
        std::copy(value.begin(), value.end(), values.begin() + (size_t(kv) * total + slot) * dim);
      }
    const test::DirectAttention direct = test::attention_by_formula(
        c.q, keys, values, std::vector<int32_t>(size_t(shape.num_kv_heads) * total, 0), shape.num_q_heads, shape.num_kv_heads,
        dim, 1, total, ops::RopeParams{});
    const std::vector<float> expected(direct.out.begin(), direct.out.end());
    INFO("seed ", test::seed(), " ", std::string(dtype_name(shape.dtype)));
    // f32: both in double past the stored operands; 1e-5 covers the rebuilt rows' rounding to
    // f32 in the reference. f16: both round the output to f16 (2^-11 relative each).
    CHECK(test::relative_max_error(got, expected) < (shape.dtype == Dtype::F32 ? 1e-5 : 2e-3));
  }
}

TEST_CASE("fourier_attention refuses a middle past its window or runs that are not 16-byte aligned") {
  // Checked before either backend reads an argument, so no buffers are needed.
  Backend& cpu = test::cpu_backend();
  const auto refusal = [&](const ops::FourierAttentionShape& shape) -> std::string {
    try {
      ops::fourier_attention(cpu, shape, ops::FourierAttentionArgs{});
    } catch (const Error& error) {
      CHECK(error.status() == KVC_ERROR_INVALID_ARGUMENT);
      return error.what();
    }
    return "";
  };
  const ops::FourierAttentionShape shape{4, 2, 16, 3, 0, 13, 16, 2, 12, 7, 5, Dtype::F32};  // 13 middle tokens, window 12
  CHECK(refusal(shape).find("pass the window") != std::string::npos);
  ops::FourierAttentionShape unaligned = shape;
  unaligned.window_length = 13;
  unaligned.middle_stride = 20;
  CHECK(refusal(unaligned).find("middle_stride") != std::string::npos);
}

}  // namespace kvc
