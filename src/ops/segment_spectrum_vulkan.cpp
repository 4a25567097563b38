#include <algorithm>

#include "ops/segment_spectrum.h"
#include "ops/vulkan_args.h"
#include "vulkan/fft.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;
constexpr uint32_t kMaxGroups = 65535;  // the least maxComputeWorkGroupCount[0]; the shaders loop past it

struct PackPush {
  uint32_t slot_stride, first_slot, length, transform_length, window_offset, head;
};

struct UnpackPush {
  uint32_t transform_length, num_bins, head;
  float scale;
};

}  // namespace

// One head at a time through one plan: its data buffer is all the work memory the op needs.
void segment_spectrum_vulkan(Backend& backend, const SegmentSpectrumShape& shape, const SegmentSpectrumArgs& args) {
  const uint32_t sequences = shape.head_dim / 2;
  vk::FftPlan& plan = backend.fft_plans().get({shape.transform_length, sequences});
  vk::Recorder& recorder = backend.recorder();
  // The pack shader's tiles: 2048 pairs' points each.
  require(shape.head_dim <= 256, KVC_ERROR_INTERNAL, "segment_spectrum packs heads of at most 256 dims");
  const uint32_t tile_points = 2048 / sequences;
  const uint32_t pack_groups = std::min(group_count_unbounded(shape.transform_length, tile_points), kMaxGroups);
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    const PackPush pack{shape.slot_stride, shape.first_slot, shape.length, shape.transform_length, shape.window_offset, head};
    recorder.dispatch({"segment_spectrum_pack", 2, sizeof(PackPush), {kWorkgroupSize, shape.head_dim, shape.dtype == Dtype::F16}},
                      {slice(args.states), plan.data()}, &pack,
                      pack_groups);
    plan.record(recorder, false);
    const UnpackPush unpack{shape.transform_length, shape.num_bins, head, shape.scale};
    recorder.dispatch({"segment_spectrum_unpack", 3, sizeof(UnpackPush), {kWorkgroupSize, shape.head_dim}},
                      {plan.data(), slice(args.bins), slice(args.spectrum)}, &unpack,
                      std::min(group_count_unbounded(uint64_t(sequences) * shape.num_bins, kWorkgroupSize), kMaxGroups));
  }
}

}  // namespace kvc::ops
