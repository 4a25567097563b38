#include "vulkan/trig_precision.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "vulkan/buffer.h"
#include "vulkan/device.h"
#include "vulkan/recorder.h"

namespace kvc::vk {
namespace {

constexpr uint32_t kWorkgroups = 128;  // of 128 invocations: 16384 angles, one every 2^18 of a turn
constexpr uint32_t kSamples = kWorkgroups * 128;
constexpr double kPi = 3.14159265358979323846;

}  // namespace

double builtin_trig_error(const std::vector<float>& samples) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  if (samples.empty() || samples.size() % 3 != 0) return kNone;
  double worst = 0.0;
  for (size_t i = 0; i < samples.size(); i += 3) {
    const double angle = samples[i];
    if (!std::isfinite(angle) || std::fabs(angle) > double(float(kPi))) return kNone;  // pi rounded to f32 is a sample
    const double error = std::max(std::fabs(samples[i + 1] - std::cos(angle)), std::fabs(samples[i + 2] - std::sin(angle)));
    if (!std::isfinite(error)) return kNone;
    worst = std::max(worst, error);
  }
  return worst;
}

std::vector<float> read_trig_samples(Device& device) {
  const size_t bytes = size_t(kSamples) * 3 * sizeof(float);
  Buffer samples(device, bytes, MemoryKind::HostVisible);
  Recorder recorder(device);
  recorder.begin();
  recorder.dispatch({"trig_precision", 1, 0, {}}, {BufferSlice{&samples}}, nullptr, kWorkgroups);
  recorder.submit();
  std::vector<float> values(size_t(kSamples) * 3);
  std::memcpy(values.data(), samples.mapped(), bytes);
  return values;
}

bool rotates_by_builtin_trig(const Device& device) {
  const char* setting = std::getenv("KVC_ROPE_TRIG");
  return device.builtin_trig_precise() && !(setting && std::strcmp(setting, "polynomial") == 0);
}

}  // namespace kvc::vk
