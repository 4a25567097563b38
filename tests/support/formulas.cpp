#include "support/formulas.h"

#include <algorithm>
#include <cmath>
#include <complex>

namespace kvc::test {

std::vector<float> rope_by_formula(const std::vector<float>& row, const ops::RopeParams& rope, int64_t position) {
  std::vector<float> out = row;
  if (!rope.enabled()) return out;
  const uint32_t pairs = rope.rotary_dims / 2;
  for (uint32_t j = 0; j < pairs; ++j) {
    const uint32_t a = rope.style == KVC_ROPE_NEOX ? j : 2 * j;
    const uint32_t b = rope.style == KVC_ROPE_NEOX ? j + pairs : 2 * j + 1;
    const long double frequency = std::pow(static_cast<long double>(rope.theta), -2.0L * j / rope.rotary_dims);
    const long double angle = std::fmod(static_cast<long double>(position) * frequency, 2.0L * M_PIl);
    const std::complex<long double> rotated = std::complex<long double>(row[a], row[b]) * std::polar(1.0L, angle);
    out[a] = static_cast<float>(rotated.real());
    out[b] = static_cast<float>(rotated.imag());
  }
  return out;
}

DirectAttention attention_by_formula(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                     const std::vector<int32_t>& positions, uint32_t num_q_heads, uint32_t num_kv_heads,
                                     uint32_t head_dim, uint32_t num_queries, uint32_t num_slots, const ops::RopeParams& rope) {
  DirectAttention result;
  result.out.assign(size_t(num_queries) * num_q_heads * head_dim, 0.0);
  result.scores.assign(size_t(num_kv_heads) * num_slots, 0.0);
  const uint32_t group = num_q_heads / num_kv_heads;
  auto row = [&](const std::vector<float>& data, size_t base) {
    return std::vector<float>(data.begin() + base, data.begin() + base + head_dim);
  };
  for (uint32_t i = 0; i < num_queries; ++i) {
    const uint32_t own_slot = num_slots - num_queries + i;
    for (uint32_t h = 0; h < num_q_heads; ++h) {
      const uint32_t kv = h / group;
      const std::vector<float> query = rope_by_formula(row(q, (size_t(i) * num_q_heads + h) * head_dim), rope, positions[own_slot]);
      std::vector<long double> logits(own_slot + 1);
      for (uint32_t j = 0; j <= own_slot; ++j) {
        const std::vector<float> key = rope_by_formula(row(k, (size_t(kv) * num_slots + j) * head_dim), rope, positions[size_t(kv) * num_slots + j]);
        long double dot = 0;
        for (uint32_t d = 0; d < head_dim; ++d) dot += static_cast<long double>(query[d]) * key[d];
        logits[j] = dot / std::sqrt(static_cast<long double>(head_dim));
      }
      const long double max_logit = *std::max_element(logits.begin(), logits.end());
      long double total = 0;
      for (long double& logit : logits) total += (logit = std::exp(logit - max_logit));
      for (uint32_t j = 0; j <= own_slot; ++j) {
        const long double p = logits[j] / total;
        result.scores[size_t(kv) * num_slots + j] += static_cast<double>(p);
        for (uint32_t d = 0; d < head_dim; ++d)
          result.out[(size_t(i) * num_q_heads + h) * head_dim + d] += static_cast<double>(p * v[(size_t(kv) * num_slots + j) * head_dim + d]);
      }
    }
  }
  return result;
}

namespace {
long double dct_alpha(size_t length, size_t t) { return std::sqrt((t == 0 ? 1.0L : 2.0L) / length); }
// The cosine in double: long double cos of arguments up to 5e4 made the N = 4096 checks take
// tens of seconds; double's 1e-16 relative argument error is far below every tolerance.
long double dct_cosine(size_t length, size_t t, size_t n) { return std::cos(M_PI * double(t * (2 * n + 1)) / (2.0 * length)); }
}  // namespace

std::vector<long double> dct2_by_formula(const std::vector<long double>& x) {
  const size_t length = x.size();
  std::vector<long double> z(length, 0.0L);
  for (size_t t = 0; t < length; ++t) {
    for (size_t n = 0; n < length; ++n) z[t] += x[n] * dct_cosine(length, t, n);
    z[t] *= dct_alpha(length, t);
  }
  return z;
}

std::vector<long double> dct3_by_formula(const std::vector<long double>& z) {
  const size_t length = z.size();
  std::vector<long double> x(length, 0.0L);
  for (size_t n = 0; n < length; ++n)
    for (size_t t = 0; t < length; ++t) x[n] += dct_alpha(length, t) * z[t] * dct_cosine(length, t, n);
  return x;
}

std::vector<long double> freqkv_compression_by_formula(const std::vector<long double>& x, size_t retained) {
  std::vector<long double> kept = dct2_by_formula(x);
  kept.resize(retained);
  std::vector<long double> y = dct3_by_formula(kept);
  for (long double& value : y) value *= std::sqrt(static_cast<long double>(retained) / x.size());
  return y;
}

std::vector<long double> fourier_matrix_by_formula(uint32_t num_states, uint32_t length, uint32_t first_index,
                                                   uint32_t window_length) {
  std::vector<long double> matrix(size_t(2) * num_states * length);
  for (uint32_t n = 0; n < num_states; ++n)
    for (uint32_t t = 0; t < length; ++t) {
      const long double angle = 2.0L * M_PIl * n * (static_cast<long double>(first_index) + t) / window_length;
      matrix[size_t(2 * n) * length + t] = std::cos(angle);
      matrix[size_t(2 * n + 1) * length + t] = std::sin(angle);
    }
  return matrix;
}

std::vector<long double> fourier_coefficients_by_formula(const std::vector<long double>& x, uint32_t num_states,
                                                         uint32_t first_index, uint32_t window_length) {
  const uint32_t length = static_cast<uint32_t>(x.size());
  const std::vector<long double> matrix = fourier_matrix_by_formula(num_states, length, first_index, window_length);
  std::vector<long double> coefficients(size_t(2) * num_states, 0.0L);
  for (size_t row = 0; row < coefficients.size(); ++row) {
    for (uint32_t t = 0; t < length; ++t) coefficients[row] += matrix[row * length + t] * x[t];
    coefficients[row] /= window_length;
  }
  return coefficients;
}

std::vector<long double> fourier_inverse_by_formula(const std::vector<long double>& coefficients, uint32_t length,
                                                    uint32_t first_index, uint32_t window_length) {
  const uint32_t num_states = static_cast<uint32_t>(coefficients.size() / 2);
  const std::vector<long double> matrix = fourier_matrix_by_formula(num_states, length, first_index, window_length);
  std::vector<long double> values(length, 0.0L);
  for (uint32_t t = 0; t < length; ++t)
    for (size_t row = 0; row < coefficients.size(); ++row) values[t] += matrix[row * length + t] * coefficients[row];
  return values;
}

}  // namespace kvc::test
