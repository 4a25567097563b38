// The papers' formulas, written directly from their definitions in long double, with no code
// shared with the library: what the CPU references are checked against.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/rope.h"

namespace kvc::test {

// RoPE of one row: pair (a, b) as x_a + i x_b times exp(i * position * theta^(-2j/r)).
std::vector<float> rope_by_formula(const std::vector<float>& row, const ops::RopeParams& rope, int64_t position);

struct DirectAttention {
  std::vector<double> out;     // [n_queries][num_q_heads][head_dim]
  std::vector<double> scores;  // [num_kv_heads][num_slots]
};

// softmax(q k^T / sqrt(d)) v per query row, causal over the chunk (the last n slots), RoPE
// by formula with the slots' positions; q, out [n][qh][d]; k, v [kv][slots][d].
DirectAttention attention_by_formula(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                     const std::vector<int32_t>& positions, uint32_t num_q_heads, uint32_t num_kv_heads,
                                     uint32_t head_dim, uint32_t num_queries, uint32_t num_slots, const ops::RopeParams& rope);

// FreqKV appendix A, eq. 6: z_t = alpha_t sum_n x_n cos(pi t (2n + 1) / 2N), alpha_0 = sqrt(1/N),
// alpha_t = sqrt(2/N); O(N^2), sums in long double.
std::vector<long double> dct2_by_formula(const std::vector<long double>& x);
// Eq. 7, the inverse: x_n = sum_t alpha_t z_t cos(pi t (2n + 1) / 2N).
std::vector<long double> dct3_by_formula(const std::vector<long double>& z);
// FreqKV eq. 3 with appendix F.5's rescale: sqrt(L / N) * IDCT_L(DCT_N(x)[0 : L]), L = retained.
std::vector<long double> freqkv_compression_by_formula(const std::vector<long double>& x, size_t retained);

// FourierAttention eq. 4 built as a matrix: F (2N x L) with F[2n][t] = cos(2 pi n (first + t) / T)
// and F[2n + 1][t] = sin(...), row-major, in long double.
std::vector<long double> fourier_matrix_by_formula(uint32_t num_states, uint32_t length, uint32_t first_index,
                                                   uint32_t window_length);
// Eq. 3: C = (1/T) F x for one dim's sequence x, 2N values.
std::vector<long double> fourier_coefficients_by_formula(const std::vector<long double>& x, uint32_t num_states,
                                                         uint32_t first_index, uint32_t window_length);
// Eq. 5: F^T C at `length` columns from first_index.
std::vector<long double> fourier_inverse_by_formula(const std::vector<long double>& coefficients, uint32_t length,
                                                    uint32_t first_index, uint32_t window_length);

}  // namespace kvc::test
