// The CPU reference of the IWDFT fold against FAEDKV's eq. 9 as printed (with the twiddle
// that keeps eq. 4's sign), applied in double to the turning state S, and against the closed
// form every token weighs the same in: S_N[k] = (1/N) sum_j x_j e^{-2 pi i k p_j / M} in the
// stored frame, p_j being the point token j was folded onto.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>

#include "ops/segment_spectrum.h"
#include "ops/spectral_fold.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("spectral_fold follows eq. 9 token by token and weighs every token alike") {
  const uint32_t heads = 2, dim = 4, M = 13, window = 5, sinks = 2, stride = sinks + window;
  const std::vector<uint32_t> bins = {0, 1, 4, 6};  // 6 = floor(13 / 2)
  Backend& cpu = test::cpu_backend();
  // The prompt's segment (M tokens) and the state it starts from: its DFT over M (eq. 10).
  std::vector<float> segment = test::random_floats(size_t(heads) * M * dim);
  auto segment_rows = test::make_tensor(cpu, segment.data(), segment.size() * 4);
  auto bin_table = test::make_tensor(cpu, bins.data(), bins.size() * 4);
  const size_t state_floats = size_t(heads) * bins.size() * dim * 2;
  auto key_states = test::make_poisoned(cpu, state_floats * 4), value_states = test::make_poisoned(cpu, state_floats * 4);
  const ops::SegmentSpectrumShape transform{heads, dim, M, 0, M, M, 0, uint32_t(bins.size()), Dtype::F32, 1.0f / M};
  ops::segment_spectrum_cpu(transform, {view(*segment_rows), view(*bin_table), view(*key_states)});
  ops::segment_spectrum_cpu(transform, {view(*segment_rows), view(*bin_table), view(*value_states)});

  // eq. 9 in double on S (the turning state; stored T = S e^{-2 pi i k (N - M) / M}).
  using Complex = std::complex<double>;
  std::vector<Complex> eq9(state_floats / 2);
  for (size_t i = 0; i < eq9.size(); ++i) eq9[i] = Complex(static_cast<const float*>(key_states->host())[2 * i], static_cast<const float*>(key_states->host())[2 * i + 1]);
  std::vector<float> folded_tokens;  // every token folded after the prompt, per head, in order
  std::vector<std::vector<float>> per_head(heads);

  uint64_t folded = M;
  uint32_t ring_start = 0;
  for (uint32_t n_tokens : {1u, 3u, 5u, 2u, 4u, 1u}) {  // past several laps of the ring and of M
    std::vector<float> window_rows = test::random_floats(size_t(heads) * stride * dim);
    auto rows = test::make_tensor(cpu, window_rows.data(), window_rows.size() * 4);
    const ops::SpectralFoldShape shape{heads, dim, stride, uint32_t(bins.size()), M, folded, n_tokens, sinks, window, ring_start, Dtype::F32};
    ops::spectral_fold_cpu(shape, {view(*rows), view(*rows), view(*bin_table), view(*key_states), view(*value_states)});
    for (uint32_t i = 0; i < n_tokens; ++i) {
      const uint32_t slot = sinks + (ring_start + i) % window;
      const double N = double(folded + i);
      for (uint32_t head = 0; head < heads; ++head) {
        const float* x = &window_rows[(size_t(head) * stride + slot) * dim];
        per_head[head].insert(per_head[head].end(), x, x + dim);
        for (uint32_t b = 0; b < bins.size(); ++b) {
          const Complex twiddle_inverse = std::polar(1.0, 2 * M_PI * bins[b] / M);  // W_k^{-1}
          for (uint32_t d = 0; d < dim; ++d) {
            Complex& s = eq9[(size_t(head) * bins.size() + b) * dim + d];
            s = twiddle_inverse * (N / (N + 1) * s + double(x[d]) / (N + 1));
          }
        }
      }
    }
    folded += n_tokens;
    ring_start = (ring_start + n_tokens) % window;

    const float* stored = static_cast<const float*>(key_states->host());
    const uint64_t turned = folded - M;
    for (uint32_t head = 0; head < heads; ++head)
      for (uint32_t b = 0; b < bins.size(); ++b)
        for (uint32_t d = 0; d < dim; ++d) {
          const size_t cell = (size_t(head) * bins.size() + b) * dim + d;
          const Complex t(stored[2 * cell], stored[2 * cell + 1]);
          // eq. 9's S, brought into the stored frame.
          const Complex expected_eq9 = eq9[cell] * std::polar(1.0, -2 * M_PI * double(bins[b] * turned % M) / M);
          // The closed form: the prompt's tokens at points 0..M-1, folded token j at point j mod M.
          Complex sum = 0;
          for (uint32_t n = 0; n < M; ++n) sum += double(segment[(size_t(head) * M + n) * dim + d]) * std::polar(1.0, -2 * M_PI * double(bins[b] * n % M) / M);
          for (uint64_t j = 0; j < turned; ++j)
            sum += double(per_head[head][j * dim + d]) * std::polar(1.0, -2 * M_PI * double(bins[b] * (j % M) % M) / M);
          const Complex expected_closed = sum / double(folded);
          INFO("after ", folded, " tokens, head ", head, " bin ", bins[b], " dim ", d);
          // Both in double against an f32 state rounded once per fold: ~1e-7 per fold.
          CHECK(std::abs(t - expected_eq9) < 2e-6);
          CHECK(std::abs(t - expected_closed) < 2e-6);
        }
  }
}

}  // namespace kvc
