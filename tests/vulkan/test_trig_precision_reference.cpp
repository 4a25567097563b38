// The built-in trig probe's judge on samples made here (a device's own samples are checked on
// the GPU): exact values measure within f32 rounding, an error above the bound is seen wherever it
// sits, and malformed samples never pass.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "vulkan/trig_precision.h"

namespace kvc {
namespace {

// Samples as trig_precision.comp writes them, cos and sin rounded to f32 from double: what
// correctly rounded built-ins would give.
std::vector<float> exact_samples(int count) {
  std::vector<float> samples;
  for (int i = 0; i < count; ++i) {
    const float angle = static_cast<float>(-3.14159 + 6.28318 * i / count);
    samples.insert(samples.end(), {angle, static_cast<float>(std::cos(double(angle))), static_cast<float>(std::sin(double(angle)))});
  }
  return samples;
}

TEST_CASE("builtin_trig_error: exact values pass, one error above the bound fails, malformed samples fail") {
  std::vector<float> samples = exact_samples(1001);
  const double exact = vk::builtin_trig_error(samples);
  CHECK(exact <= 0x1p-24);  // f32 rounding of values in [-1, 1]
  CHECK(exact <= vk::kBuiltinTrigBound);
  // One sine off by 2^-19 (twice the bound) in the middle of the turn fails; 2^-21 passes.
  std::vector<float> off = samples;
  off[3 * 500 + 2] += static_cast<float>(0x1p-19);
  CHECK(vk::builtin_trig_error(off) > vk::kBuiltinTrigBound);
  off = samples;
  off[3 * 7 + 1] -= static_cast<float>(0x1p-21);
  CHECK(vk::builtin_trig_error(off) <= vk::kBuiltinTrigBound);
  // A cosine off at the last sample.
  off = samples;
  off[3 * 1000 + 1] += static_cast<float>(0x1p-18);
  CHECK(vk::builtin_trig_error(off) > vk::kBuiltinTrigBound);

  const double none = std::numeric_limits<double>::infinity();
  CHECK(vk::builtin_trig_error({}) == none);
  CHECK(vk::builtin_trig_error(std::vector<float>(samples.begin(), samples.end() - 1)) == none);  // not triples
  off = samples;
  off[4] = std::numeric_limits<float>::quiet_NaN();
  CHECK(vk::builtin_trig_error(off) == none);
  off = samples;
  off[0] = 4.0f;  // outside [-pi, pi]: not what the probe measures
  CHECK(vk::builtin_trig_error(off) == none);
}

}  // namespace
}  // namespace kvc
