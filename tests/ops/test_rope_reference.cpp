// The CPU RoPE against the paper's formula: pair (a, b) as the complex number x_a + i x_b,
// multiplied by exp(i * position * theta^(-2j/r)), evaluated here independently in long double.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>

#include "ops/rope.h"
#include "support/formulas.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("rope_cpu equals the complex-rotation formula, rotary dims only, scale folded in") {
  for (kvc_rope_style style : {KVC_ROPE_NEOX, KVC_ROPE_INTERLEAVED}) {
    for (uint32_t head_dim : {8u, 64u, 96u, 128u}) {
      for (uint32_t rotary_dims : {8u, head_dim / 2 - (head_dim / 2) % 8, head_dim}) {
        if (rotary_dims == 0) continue;
        ops::RopeParams rope{style, rotary_dims, 10000.0};
        const uint32_t tokens = 3, heads = 2;
        std::vector<float> input = test::random_floats(size_t(tokens) * heads * head_dim);
        std::vector<int32_t> positions = {0, 17, 1 << 20};
        std::vector<float> output(input.size());
        Tensor in(test::cpu_backend(), input.size() * 4), pos(test::cpu_backend(), 12), out(test::cpu_backend(), output.size() * 4);
        std::memcpy(in.host(), input.data(), input.size() * 4);
        std::memcpy(pos.host(), positions.data(), 12);
        const float scale = 0.25f;
        ops::rope_cpu({tokens, heads, head_dim, Dtype::F32, rope, scale}, {view(in), view(pos), View{}, view(out)});
        std::memcpy(output.data(), out.host(), output.size() * 4);
        for (uint32_t t = 0; t < tokens; ++t) {
          for (uint32_t h = 0; h < heads; ++h) {
            const size_t base = (size_t(t) * heads + h) * head_dim;
            const std::vector<float> row(input.begin() + base, input.begin() + base + head_dim);
            const std::vector<float> expected = test::rope_by_formula(row, rope, positions[t]);
            INFO("style ", style, " head_dim ", head_dim, " rotary ", rotary_dims, " position ", positions[t]);
            for (uint32_t d = 0; d < head_dim; ++d) CHECK(output[base + d] == doctest::Approx(expected[d] * scale).epsilon(1e-6));
          }
        }
      }
    }
  }
}

TEST_CASE("RoPE makes q.k depend only on the position difference") {
  const ops::RopeParams rope{KVC_ROPE_NEOX, 64, 10000.0};
  const std::vector<double> inv_freq = ops::rope_inverse_frequencies(rope);
  const std::vector<float> q = test::random_floats(64), k = test::random_floats(64);
  auto dot_at = [&](int64_t q_position, int64_t k_position) {
    std::vector<float> qr = q, kr = k;
    ops::rope_rotate_row(rope, inv_freq, qr.data(), q_position);
    ops::rope_rotate_row(rope, inv_freq, kr.data(), k_position);
    double dot = 0;
    for (int d = 0; d < 64; ++d) dot += double(qr[d]) * kr[d];
    return dot;
  };
  CHECK(dot_at(10, 3) == doctest::Approx(dot_at(1007, 1000)).epsilon(1e-5));
  CHECK(dot_at(5000, 4999) == doctest::Approx(dot_at(1, 0)).epsilon(1e-5));
}

TEST_CASE("the turn table gives the angle modulo one turn for large positions") {
  const ops::RopeParams rope{KVC_ROPE_NEOX, 128, 500000.0};
  const std::vector<double> inv_freq = ops::rope_inverse_frequencies(rope);
  const std::vector<uint32_t> table = ops::rope_turn_table(rope);
  for (uint32_t position : {1u, 4095u, 131071u, 1000003u}) {
    for (size_t j = 0; j < inv_freq.size(); j += 7) {
      // What the shaders compute: the top 32 bits of (position * fixed-point turns) mod 2^64.
      const uint64_t low = uint64_t(position) * table[2 * j + 1];
      const uint32_t fraction = static_cast<uint32_t>(position * table[2 * j] + (low >> 32));
      const long double expected = std::fmod(static_cast<long double>(position) * inv_freq[j] / (2 * M_PIl), 1.0L);
      long double difference = std::fabs(fraction / 4294967296.0L - expected);
      difference = std::min(difference, 1.0L - difference);
      INFO("position ", position, " pair ", j);
      CHECK(difference < 3e-9L);
    }
  }
}

}  // namespace kvc
