#include "ops/dct_matrix.h"

#include <cmath>

namespace kvc::ops {
namespace {

// cos(pi * numerator / denominator) with the angle reduced in integers first, so that the
// large products t (2n + 1) of long transforms lose no precision.
double cos_pi_fraction(int64_t numerator, int64_t denominator) {
  const int64_t period = 2 * denominator;
  const int64_t reduced = ((numerator % period) + period) % period;
  return std::cos(M_PI * static_cast<double>(reduced) / static_cast<double>(denominator));
}

double sin_pi_fraction(int64_t numerator, int64_t denominator) {
  return cos_pi_fraction(2 * numerator - denominator, 2 * denominator);  // sin x = cos(x - pi/2)
}

double dct_weight(uint32_t length, uint32_t t) { return std::sqrt((t == 0 ? 1.0 : 2.0) / length); }

// sum_{t=0}^{terms-1} cos(t * pi * p / q) by the Dirichlet-kernel closed form
// sin(terms x / 2) cos((terms - 1) x / 2) / sin(x / 2), x = pi p / q.
double cosine_sum(uint32_t terms, int64_t p, int64_t q) {
  if (p % (2 * q) == 0) return terms;  // x is a multiple of 2 pi: every term is 1
  return sin_pi_fraction(int64_t(terms) * p, 2 * q) * cos_pi_fraction(int64_t(terms - 1) * p, 2 * q) /
         sin_pi_fraction(p, 2 * q);
}

}  // namespace

std::vector<float> dct2_matrix(uint32_t length) {
  std::vector<float> matrix(size_t(length) * length);
  for (uint32_t t = 0; t < length; ++t)
    for (uint32_t n = 0; n < length; ++n)
      matrix[size_t(t) * length + n] =
          static_cast<float>(dct_weight(length, t) * cos_pi_fraction(int64_t(t) * (2 * n + 1), 2 * int64_t(length)));
  return matrix;
}

std::vector<float> dct3_matrix(uint32_t length) {
  const std::vector<float> forward = dct2_matrix(length);
  std::vector<float> matrix(forward.size());
  for (uint32_t t = 0; t < length; ++t)
    for (uint32_t n = 0; n < length; ++n) matrix[size_t(n) * length + t] = forward[size_t(t) * length + n];
  return matrix;
}

std::vector<float> freqkv_compression_matrix(uint32_t in_length, uint32_t out_length) {
  // With a = pi (2m + 1) / 2L and b = pi (2n + 1) / 2N, the product of the weights is
  // 1 / sqrt(LN) for t = 0 and 2 / sqrt(LN) otherwise, and 2 cos(at) cos(bt) =
  // cos((a - b) t) + cos((a + b) t), so the entry is
  //   sqrt(L/N) / sqrt(LN) * (1 + 2 sum_{t=1}^{L-1} cos(at) cos(bt))
  //   = (C(a - b) + C(a + b) - 1) / N,  C(x) = sum_{t=0}^{L-1} cos(x t).
  // a -+ b = pi p / (2LN) with p = (2m + 1) N -+ (2n + 1) L, an integer.
  // cos(at) and cos(bt) each gain a factor (-1)^t when m -> L-1-m and n -> N-1-n, so their
  // product and entry (m, n) equal entry (L-1-m, N-1-n): the second half of the rows mirrors
  // the first (half the trig calls: 0.3 s for Llama-2's window on one core).
  const int64_t N = in_length, L = out_length;
  std::vector<float> matrix(size_t(L) * N);
  for (int64_t m = 0; m < L; ++m)
    for (int64_t n = 0; n < N; ++n) {
      if (2 * m + 1 > L) {
        matrix[size_t(m) * N + n] = matrix[size_t(L - 1 - m) * N + (N - 1 - n)];
        continue;
      }
      const int64_t difference = (2 * m + 1) * N - (2 * n + 1) * L, sum = (2 * m + 1) * N + (2 * n + 1) * L;
      const double entry = cosine_sum(out_length, difference, 2 * L * N) + cosine_sum(out_length, sum, 2 * L * N) - 1.0;
      matrix[size_t(m) * N + n] = static_cast<float>(entry / static_cast<double>(N));
    }
  return matrix;
}

}  // namespace kvc::ops
