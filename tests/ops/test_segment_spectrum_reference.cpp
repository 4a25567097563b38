// The CPU reference of segment_spectrum against what a DFT must give: a cosine's two bins,
// and the inverse DFT of every bin returning the zero-padded window it came from.
#include <doctest/doctest.h>

#include <cmath>

#include "ops/segment_spectrum.h"
#include "support/test_support.h"

namespace kvc {
namespace {

std::vector<float> spectrum_of(const ops::SegmentSpectrumShape& shape, std::vector<float>& rows, const std::vector<uint32_t>& bins) {
  Backend& cpu = test::cpu_backend();
  auto states = test::make_tensor(cpu, rows.data(), rows.size() * 4);
  auto bin_table = test::make_tensor(cpu, bins.data(), bins.size() * 4);
  auto out = test::make_poisoned(cpu, size_t(shape.num_heads) * shape.num_bins * shape.head_dim * 8);
  ops::segment_spectrum_cpu(shape, {view(*states), view(*bin_table), view(*out)});
  return test::decode(test::read_tensor(cpu, *out, out->bytes()), Dtype::F32);
}

}  // namespace

TEST_CASE("segment_spectrum of a cosine holds T/2 at its two bins and nothing elsewhere") {
  const uint32_t length = 45, dim = 2, frequency = 7;  // 45 = 9 * 5: a whole window, odd T
  ops::SegmentSpectrumShape shape{1, dim, length, 0, length, length, 0, length, Dtype::F32};
  std::vector<float> rows(size_t(length) * dim);
  for (uint32_t n = 0; n < length; ++n) {
    rows[n * dim] = float(std::cos(2 * M_PI * frequency * n / length));
    rows[n * dim + 1] = float(std::sin(2 * M_PI * frequency * n / length));
  }
  std::vector<uint32_t> bins(length);
  for (uint32_t k = 0; k < length; ++k) bins[k] = k;
  const std::vector<float> spectrum = spectrum_of(shape, rows, bins);
  for (uint32_t k = 0; k < length; ++k) {
    INFO("bin ", k);
    const bool line = k == frequency || k == length - frequency;
    // cos: T/2 at k0 and T - k0; sin: -i T/2 at k0 and +i T/2 at T - k0. f32 rounding of the input only.
    CHECK(spectrum[k * 4 + 0] == doctest::Approx(line ? length / 2.0 : 0.0).scale(1).epsilon(1e-5));
    CHECK(spectrum[k * 4 + 1] == doctest::Approx(0.0).scale(1).epsilon(1e-5));
    CHECK(spectrum[k * 4 + 2] == doctest::Approx(0.0).scale(1).epsilon(1e-5));
    CHECK(spectrum[k * 4 + 3] == doctest::Approx(k == frequency ? -double(length) / 2.0 : k == length - frequency ? length / 2.0 : 0.0).scale(1).epsilon(1e-5));
  }
}

TEST_CASE("segment_spectrum's inverse DFT over every bin returns the zero-padded window") {
  // Two heads, a segment starting at slot 3 placed at point 5 of a 31-point window.
  ops::SegmentSpectrumShape shape{2, 4, 20, 3, 13, 31, 5, 31, Dtype::F32};
  std::vector<float> rows = test::random_floats(size_t(shape.num_heads) * shape.slot_stride * shape.head_dim);
  std::vector<uint32_t> bins(shape.transform_length);
  for (uint32_t k = 0; k < shape.transform_length; ++k) bins[k] = (k * 7) % shape.transform_length;  // any order
  const std::vector<float> spectrum = spectrum_of(shape, rows, bins);
  const uint32_t T = shape.transform_length;
  for (uint32_t head = 0; head < shape.num_heads; ++head)
    for (uint32_t point = 0; point < T; ++point)
      for (uint32_t d = 0; d < shape.head_dim; ++d) {
        double value = 0;
        for (uint32_t b = 0; b < T; ++b) {
          const double angle = 2 * M_PI * double(uint64_t(bins[b]) * point % T) / T;
          const float* x = &spectrum[((size_t(head) * T + b) * shape.head_dim + d) * 2];
          value += x[0] * std::cos(angle) - x[1] * std::sin(angle);
        }
        value /= T;
        const bool inside = point >= shape.window_offset && point < shape.window_offset + shape.length;
        const double expected = inside ? rows[(size_t(head) * shape.slot_stride + shape.first_slot + point - shape.window_offset) * shape.head_dim + d] : 0.0;
        INFO("head ", head, " point ", point, " dim ", d);
        CHECK(value == doctest::Approx(expected).scale(1).epsilon(1e-5));  // f32 bins: ~1e-7 relative
      }
}

}  // namespace kvc
