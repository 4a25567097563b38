// The CPU sequence transform with ops/dct_matrix.h's matrices against FreqKV's formulas
// (appendix A, eq. 6 and 7; section 3.3, eq. 3), evaluated independently in long double.
#include <doctest/doctest.h>

#include <cmath>

#include "ops/dct_matrix.h"
#include "ops/sequence_transform.h"
#include "support/formulas.h"
#include "support/test_support.h"

namespace kvc {
namespace {

constexpr uint32_t kColumns = 8;  // the smallest head_dim: each column is one signal

// Applies `matrix` ([out_length][in_length]) to `rows` ([in_length][kColumns]) on the CPU.
std::vector<float> transform_on_cpu(const std::vector<float>& matrix, const std::vector<float>& rows, uint32_t in_length,
                                    uint32_t out_length) {
  Backend& cpu = test::cpu_backend();
  auto in = test::make_tensor(cpu, rows.data(), rows.size() * 4);
  auto weights = test::make_tensor(cpu, matrix.data(), matrix.size() * 4);
  auto out = test::make_poisoned(cpu, size_t(out_length) * kColumns * 4);
  ops::sequence_transform_cpu({1, kColumns, in_length, out_length, in_length, out_length, Dtype::F32},
                              {view(*in), view(*weights), view(*out)});
  return test::decode(test::read_tensor(cpu, *out, size_t(out_length) * kColumns * 4), Dtype::F32);
}

std::vector<long double> column(const std::vector<float>& rows, uint32_t c) {
  std::vector<long double> values(rows.size() / kColumns);
  for (size_t n = 0; n < values.size(); ++n) values[n] = rows[n * kColumns + c];
  return values;
}

std::vector<float> to_floats(const std::vector<long double>& values) { return std::vector<float>(values.begin(), values.end()); }

// Matrix entries and outputs are stored as f32 (relative rounding 6e-8 each) and summed in
// double, so the error is a few 1e-7 of the output's scale; a wrong coefficient, sign or
// index shows as O(1).
constexpr double kTolerance = 2e-6;

}  // namespace

TEST_CASE("DCT-II and DCT-III matrices equal FreqKV eq. 6 and 7 for any length, primes included") {
  for (uint32_t length : {1u, 2u, 3u, 5u, 8u, 17u, 64u, 127u, 1000u, 1021u, 4093u, 4096u}) {
    const std::vector<float> x = test::random_floats(size_t(length) * kColumns);
    const std::vector<float> z = transform_on_cpu(ops::dct2_matrix(length), x, length, length);
    const bool inverse_too = length != 4093;  // the O(N^2) long double formula is the slow part
    const std::vector<float> x_back = inverse_too ? transform_on_cpu(ops::dct3_matrix(length), z, length, length) : x;
    // Long transforms: one column (each check is O(N^2)) catches any indexing error; short: all.
    for (uint32_t c : length > 1000 ? std::vector<uint32_t>{kColumns - 1} : std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}) {
      INFO("length ", length, " column ", c);
      CHECK(test::relative_max_error(to_floats(column(z, c)), to_floats(test::dct2_by_formula(column(x, c)))) < kTolerance);
      if (inverse_too)
        CHECK(test::relative_max_error(to_floats(column(x_back, c)), to_floats(test::dct3_by_formula(column(z, c)))) < kTolerance);
    }
  }
}

TEST_CASE("the FreqKV matrix equals DCT, truncation, IDCT and rescale by formula (eq. 3)") {
  for (auto [length, retained] : {std::pair{2u, 1u}, {7u, 3u}, {64u, 32u}, {100u, 25u}, {1000u, 500u}, {1021u, 765u}}) {
    const std::vector<float> x = test::random_floats(size_t(length) * kColumns);
    const std::vector<float> y = transform_on_cpu(ops::freqkv_compression_matrix(length, retained), x, length, retained);
    for (uint32_t c : {0u, 5u}) {
      INFO("N ", length, " L ", retained, " column ", c);
      CHECK(test::relative_max_error(to_floats(column(y, c)), to_floats(test::freqkv_compression_by_formula(column(x, c), retained))) < kTolerance);
    }
  }
}

TEST_CASE("a signal of the lowest L cosines survives a compression, resampled at L points") {
  // x_n = f((2n + 1) / 2N) with f(u) = sum_{t<L} c_t w_t cos(pi t u), w_0 = 1, w_t = sqrt(2):
  // its DCT is c_t sqrt(N) for t < L and 0 above, so eq. 3 with the sqrt(L/N) rescale returns
  // f sampled at the L points (2m + 1) / 2L: the same amplitude, nothing lost (appendix F.5).
  for (auto [length, retained] : {std::pair{8u, 4u}, {63u, 31u}, {64u, 16u}, {100u, 75u}, {1000u, 500u}, {1021u, 510u}}) {
    const std::vector<float> coefficients = test::random_floats(size_t(retained) * kColumns);
    auto f = [&](long double u, uint32_t c) {
      long double value = 0;
      for (uint32_t t = 0; t < retained; ++t)
        value += coefficients[t * kColumns + c] * (t == 0 ? 1.0L : std::sqrt(2.0L)) * std::cos(M_PI * t * static_cast<double>(u));
      return value;
    };
    std::vector<float> x(size_t(length) * kColumns), expected(size_t(retained) * kColumns);
    for (uint32_t c = 0; c < kColumns; ++c) {
      for (uint32_t n = 0; n < length; ++n) x[n * kColumns + c] = static_cast<float>(f((2.0L * n + 1) / (2.0L * length), c));
      for (uint32_t m = 0; m < retained; ++m) expected[m * kColumns + c] = static_cast<float>(f((2.0L * m + 1) / (2.0L * retained), c));
    }
    INFO("N ", length, " L ", retained);
    // x itself is rounded to f32 before the transform: that adds ~1e-7 of the scale per term.
    CHECK(test::relative_max_error(transform_on_cpu(ops::freqkv_compression_matrix(length, retained), x, length, retained),
                                   expected) < 1e-5);
  }
}

TEST_CASE("the energy a compression keeps is L/N times the kept squared DCT coefficients") {
  // y = sqrt(L/N) IDCT_L(z[0:L]) and the orthonormal IDCT keeps energy (Parseval), so
  // sum y^2 = (L / N) sum_{t<L} z_t^2.
  for (auto [length, retained] : {std::pair{16u, 8u}, {99u, 49u}, {512u, 128u}, {1021u, 510u}}) {
    const std::vector<float> x = test::random_floats(size_t(length) * kColumns);
    const std::vector<float> y = transform_on_cpu(ops::freqkv_compression_matrix(length, retained), x, length, retained);
    for (uint32_t c = 0; c < kColumns; ++c) {
      const std::vector<long double> z = test::dct2_by_formula(column(x, c));
      long double kept = 0, energy = 0;
      for (uint32_t t = 0; t < retained; ++t) kept += z[t] * z[t];
      for (long double value : column(y, c)) energy += value * value;
      INFO("N ", length, " L ", retained, " column ", c);
      // Both sides are sums of L squares whose terms carry f32 rounding (~1e-7 relative).
      CHECK(static_cast<double>(energy) == doctest::Approx(static_cast<double>(kept * retained / length)).epsilon(1e-5));
    }
  }
}

}  // namespace kvc
