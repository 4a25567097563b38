// The CPU reference of spectral attention: its segment is eq. 5's inverse DFT of the spectrum
// pruned by eq. 6, and its output is plain attention over that segment materialized beside the
// held slots.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numeric>

#include "ops/attention.h"
#include "ops/segment_spectrum.h"
#include "ops/spectral_attention.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("spectral reconstruction is the inverse DFT of the pruned spectrum (FAEDKV eqs. 5, 6, 10)") {
  for (uint32_t M : {12u, 13u}) {  // even (bin M/2 is its own mirror) and odd
    const uint32_t dim = 3;
    const std::vector<uint32_t> bins = M == 12 ? std::vector<uint32_t>{0, 2, 6} : std::vector<uint32_t>{1, 5, 6};
    std::vector<float> rows = test::random_floats(size_t(M) * dim);
    Backend& cpu = test::cpu_backend();
    auto states = test::make_tensor(cpu, rows.data(), rows.size() * 4);
    auto bin_table = test::make_tensor(cpu, bins.data(), bins.size() * 4);
    auto spectrum = test::make_poisoned(cpu, bins.size() * dim * 8);
    const ops::SegmentSpectrumShape transform{1, dim, M, 0, M, M, 0, uint32_t(bins.size()), Dtype::F32, 1.0f / float(M)};
    ops::segment_spectrum_cpu(transform, {view(*states), view(*bin_table), view(*spectrum)});
    const std::vector<float> rebuilt = ops::spectral_reconstruct_cpu(1, dim, M, bins, static_cast<const float*>(spectrum->host()));
    for (uint32_t d = 0; d < dim; ++d) {
      // eq. 4 over every bin, eq. 6 zeroing those neither kept nor mirrors of kept, eq. 5.
      std::vector<std::complex<double>> X(M);
      for (uint32_t k = 0; k < M; ++k)
        for (uint32_t n = 0; n < M; ++n) X[k] += double(rows[n * dim + d]) * std::polar(1.0, -2 * M_PI * k * n / M);
      for (uint32_t k = 0; k < M; ++k)
        if (std::find(bins.begin(), bins.end(), std::min(k, M - k)) == bins.end()) X[k] = 0;
      for (uint32_t n = 0; n < M; ++n) {
        std::complex<double> x = 0;
        for (uint32_t k = 0; k < M; ++k) x += X[k] * std::polar(1.0, 2 * M_PI * k * n / M);
        INFO("M ", M, " point ", n, " dim ", d);
        CHECK(std::abs(x.imag() / M) < 1e-9);  // a pruned spectrum closed under mirrors is real
        CHECK(rebuilt[n * dim + d] == doctest::Approx(x.real() / M).scale(1).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("spectral attention equals plain attention over the materialized segment and held slots") {
  const uint32_t q_heads = 4, kv_heads = 2, dim = 8, held = 9, M = 21, queries = 3;
  const std::vector<uint32_t> bins = {0, 3, 4, 10};
  Backend& cpu = test::cpu_backend();
  std::vector<float> k = test::random_floats(size_t(kv_heads) * held * dim), v = test::random_floats(k.size());
  std::vector<float> q = test::random_floats(size_t(queries) * q_heads * dim, -3, 3);
  std::vector<float> key_states = test::random_floats(size_t(kv_heads) * bins.size() * dim * 2, -0.3f, 0.3f);
  std::vector<float> value_states = test::random_floats(key_states.size());
  // Held slots as a ring leaves them: positions out of slot order; the queries' tokens are
  // positions 100..102, among the held slots; sinks 0, 1.
  const int32_t slot_positions[held] = {0, 1, 97, 101, 98, 102, 99, 100, 96};
  std::vector<int32_t> positions;
  for (uint32_t h = 0; h < kv_heads; ++h) positions.insert(positions.end(), slot_positions, slot_positions + held);
  auto t = [&](auto& data) { return test::make_tensor(cpu, data.data(), data.size() * sizeof(data[0])); };
  auto q_t = t(q), k_t = t(k), v_t = t(v), p_t = t(positions), bins_t = t(bins), ks_t = t(key_states), vs_t = t(value_states);
  auto out = test::make_poisoned(cpu, q.size() * 4);
  ops::SpectralAttentionShape shape{q_heads, kv_heads, dim, queries, held, held, 100, uint32_t(bins.size()), M, Dtype::F32};
  ops::spectral_attention_cpu(shape, {view(*q_t), view(*k_t), view(*v_t), view(*p_t), view(*bins_t), View{}, view(*ks_t), view(*vs_t), view(*out)});

  // Materialized: the segment, then the held slots by position (the queries' own last).
  const std::vector<float> seg_k = ops::spectral_reconstruct_cpu(kv_heads, dim, M, bins, key_states.data());
  const std::vector<float> seg_v = ops::spectral_reconstruct_cpu(kv_heads, dim, M, bins, value_states.data());
  std::vector<uint32_t> order(held);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return slot_positions[a] < slot_positions[b]; });
  const uint32_t slots = M + held;
  std::vector<float> flat_k(size_t(kv_heads) * slots * dim), flat_v(flat_k.size());
  for (uint32_t h = 0; h < kv_heads; ++h)
    for (uint32_t s = 0; s < slots; ++s)
      for (uint32_t d = 0; d < dim; ++d) {
        const size_t to = (size_t(h) * slots + s) * dim + d;
        const bool segment = s < M;
        flat_k[to] = segment ? seg_k[(size_t(h) * M + s) * dim + d] : k[(size_t(h) * held + order[s - M]) * dim + d];
        flat_v[to] = segment ? seg_v[(size_t(h) * M + s) * dim + d] : v[(size_t(h) * held + order[s - M]) * dim + d];
      }
  auto fk = t(flat_k), fv = t(flat_v);
  auto expected = test::make_poisoned(cpu, q.size() * 4);
  ops::AttentionShape plain{q_heads, kv_heads, dim, queries, slots, slots, Dtype::F32, {}};
  ops::attention_cpu(plain, {view(*q_t), view(*fk), view(*fv), View{}, View{}, view(*expected), View{}});
  CHECK(test::relative_max_error(test::decode(test::read_tensor(cpu, *out, out->bytes()), Dtype::F32),
                                 test::decode(test::read_tensor(cpu, *expected, expected->bytes()), Dtype::F32)) < 1e-6);
}

}  // namespace kvc
