// The IWDFT fold on Vulkan against the CPU, over folds that lap the ring, in f32 and f16, with
// a segment length long enough (2^20 + 7) that k N mod M needs the exact product.
#include <doctest/doctest.h>

#include <algorithm>

#include "ops/spectral_fold.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("spectral_fold on Vulkan equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  struct Case {
    uint32_t heads, dim, sinks, window, num_bins, segment_length;
    Dtype dtype;
  };
  for (const Case& c : {Case{2, 8, 3, 5, 7, 37, Dtype::F32}, Case{3, 64, 0, 50, 40, 1021, Dtype::F16},
                        Case{1, 16, 10, 9, 33, (1u << 20) + 7, Dtype::F32}}) {
    std::vector<uint32_t> bins(c.num_bins);
    for (uint32_t b = 0; b < c.num_bins; ++b) bins[b] = uint32_t(test::rng()() % (c.segment_length / 2 + 1));
    const uint32_t stride = c.sinks + c.window + 2;  // room beyond the ring stays unread
    std::vector<float> states = test::random_floats(size_t(c.heads) * c.num_bins * c.dim * 2);
    // Far into a long stream a token weighs 1 / N (3e-7 at M = 2^20): from random states the
    // folds would move them less than the tolerance. From zero, the state is the folds alone.
    if (c.segment_length > (1u << 16)) std::fill(states.begin(), states.end(), 0.0f);
    // Three folds (one token, a whole lap of the ring, two more), the same tokens on both backends.
    const uint32_t folds[] = {1u, c.window, 2u};
    std::vector<std::vector<unsigned char>> key_rows, value_rows;
    for (uint32_t f = 0; f < 3; ++f) {
      std::vector<float> keys = test::random_floats(size_t(c.heads) * stride * c.dim), values = test::random_floats(keys.size());
      key_rows.push_back(test::encode(keys, c.dtype));
      value_rows.push_back(test::encode(values, c.dtype));
    }
    std::vector<std::vector<float>> results;
    for (Backend* backend : {&test::cpu_backend(), gpu}) {
      auto key_states = test::make_tensor(*backend, states.data(), states.size() * 4);
      auto value_states = test::make_tensor(*backend, states.data(), states.size() * 4);
      auto bin_table = test::make_tensor(*backend, bins.data(), bins.size() * 4);
      uint64_t folded = uint64_t(c.segment_length) * 3 + 11;  // far into the stream
      uint32_t ring_start = c.window - 1;
      for (uint32_t f = 0; f < 3; ++f) {
        auto k = test::make_tensor(*backend, key_rows[f].data(), key_rows[f].size());
        auto v = test::make_tensor(*backend, value_rows[f].data(), value_rows[f].size());
        const ops::SpectralFoldShape shape{c.heads, c.dim, stride, c.num_bins, c.segment_length, folded, folds[f], c.sinks, c.window, ring_start, c.dtype};
        backend->begin();
        ops::spectral_fold(*backend, shape, {view(*k), view(*v), view(*bin_table), view(*key_states), view(*value_states)});
        backend->submit();
        folded += folds[f];
        ring_start = (ring_start + folds[f]) % c.window;
      }
      std::vector<float> both = test::decode(test::read_tensor(*backend, *key_states, states.size() * 4), Dtype::F32);
      const std::vector<float> v_out = test::decode(test::read_tensor(*backend, *value_states, states.size() * 4), Dtype::F32);
      both.insert(both.end(), v_out.begin(), v_out.end());
      results.push_back(both);
    }
    INFO("heads ", c.heads, " dim ", c.dim, " M ", c.segment_length, " ", std::string(dtype_name(c.dtype)));
    // f32 trig of an exact phase (a few ulp of 2 pi) and f32 weights: ~1e-6 of the scale.
    CHECK(test::relative_max_error(results[1], results[0]) < 1e-5);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
