#include "ops/chirp_z_vulkan.h"

#include <algorithm>

#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;
constexpr uint32_t kMaxGroups = 65535;  // the least maxComputeWorkGroupCount[0]; the shader loops past it

struct FilterPush {
  uint32_t padded_length, sequences;
};

}  // namespace

ChirpTransform chirp_transform(Backend& backend, uint32_t length, BinSpan span, uint32_t batch) {
  if (span.count == 0) span = {0, length};
  // The plan's buffer holds every sequence's padded transform, and the kernels bind it whole.
  const uint32_t padded = vk::chirp_padded_length(length, span.count);
  require_within(size_product({batch, padded, 8}), backend.tensor_limit(), "shorten the segment", [&] {
    return "the work buffer of " + std::to_string(batch) + " " + std::to_string(length) + "-point transforms (" +
           std::to_string(padded) + " padded points x 8 bytes each)";
  });
  ChirpTransform transform;
  transform.filter = backend.fft_plans().keep_chirp(length, span.first, span.count, batch);
  transform.plan = backend.fft_plans().keep({transform.filter->padded_length(), batch});
  return transform;
}

void record_chirp_dft(vk::Recorder& recorder, const ChirpTransform& transform, bool from_span) {
  vk::FftPlan& plan = *transform.plan;
  plan.record(recorder, false);
  if (transform.filter->direct()) return;
  const FilterPush push{transform.filter->padded_length(), plan.shape().batch};
  recorder.dispatch({"chirp_filter", 2, sizeof(FilterPush), {kWorkgroupSize, from_span}}, {plan.data(), transform.filter->filter()}, &push,
                    std::min(group_count_unbounded(push.padded_length, kWorkgroupSize), kMaxGroups));
  plan.record(recorder, true);
}

}  // namespace kvc::ops
