// The device's own trig samples: they cover the whole turn, measure what the device reported at
// creation, and NVIDIA's built-ins (an H100, driver 580) are within the bound, so that its
// decode takes them and the tests run both key rotations there.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "support/test_support.h"
#include "vulkan/device.h"
#include "vulkan/trig_precision.h"

namespace kvc {
namespace {

TEST_CASE("trig precision: the device's samples cover a turn and measure what it reported at creation") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  vk::Device& device = gpu->device();
  const std::vector<float> samples = vk::read_trig_samples(device);
  REQUIRE(samples.size() == 3 * 16384);
  float lowest = 0.0f, highest = 0.0f;
  for (size_t i = 0; i < samples.size(); i += 3) lowest = std::min(lowest, samples[i]), highest = std::max(highest, samples[i]);
  CHECK(lowest < -3.14f);
  CHECK(highest > 3.14f);
  const double error = vk::builtin_trig_error(samples);
  CHECK(error == device.builtin_trig_error());  // the same kernel, the same values
  if (device.properties().vendorID == 0x10DE) CHECK(device.builtin_trig_precise());
  {
    const test::EnvironmentSetting default_route("KVC_ROPE_TRIG", nullptr);
    CHECK(vk::rotates_by_builtin_trig(device) == device.builtin_trig_precise());
  }
  {
    const test::EnvironmentSetting exact("KVC_ROPE_TRIG", "polynomial");
    CHECK_FALSE(vk::rotates_by_builtin_trig(device));
  }
  MESSAGE(device.name(), ": built-in cos and sin within ", error, " of the exact values (bound ", vk::kBuiltinTrigBound, ")");
}

}  // namespace
}  // namespace kvc
