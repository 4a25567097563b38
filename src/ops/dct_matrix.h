// The matrices that ops::sequence_transform applies, built in double and stored f32 row-major
// [rows][columns]. Orthonormal DCT as FreqKV's appendix A defines it (eq. 6 and 7):
//   z_t = alpha_t sum_n x_n cos(pi t (2n + 1) / 2N),  alpha_0 = sqrt(1/N), alpha_t = sqrt(2/N).
#pragma once

#include <cstdint>
#include <vector>

namespace kvc::ops {

// DCT-II of `length` points: row t, column n (FreqKV eq. 6).
std::vector<float> dct2_matrix(uint32_t length);

// DCT-III of `length` points, the inverse of dct2_matrix: row n, column t (FreqKV eq. 7).
std::vector<float> dct3_matrix(uint32_t length);

// FreqKV's compression of in_length states into out_length (FreqKV eq. 3 and appendix F.5):
// sqrt(L / N) * IDCT_L(DCT_N(x)[0 : L]), with N = in_length, L = out_length < N. Row m,
// column n; built from a closed form of the cosine sums, so it costs O(L N), not O(L^2 N).
std::vector<float> freqkv_compression_matrix(uint32_t in_length, uint32_t out_length);

}  // namespace kvc::ops
