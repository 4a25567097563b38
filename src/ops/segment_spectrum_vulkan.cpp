#include <algorithm>

#include "ops/segment_spectrum.h"
#include "ops/vulkan_args.h"
#include "vulkan/fft.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;
constexpr uint32_t kMaxGroups = 65535;  // the least maxComputeWorkGroupCount[0]; the shaders loop past it

struct PackPush {
  uint32_t slot_stride, first_slot, length, transform_length, window_offset, num_heads;
};

struct UnpackPush {
  uint32_t transform_length, num_bins, num_heads;
  float scale;
};

}  // namespace

void segment_spectrum_vulkan(Backend& backend, const SegmentSpectrumShape& shape, const SegmentSpectrumArgs& args) {
  const uint32_t sequences = shape.num_heads * shape.head_dim / 2;
  vk::FftPlan& plan = backend.fft_plans().get({shape.transform_length, sequences});
  Tensor& work = backend.scratch(ScratchId::SpectrumWork, segment_spectrum_work_bytes(shape));
  vk::Recorder& recorder = backend.recorder();

  const PackPush pack{shape.slot_stride, shape.first_slot, shape.length, shape.transform_length, shape.window_offset, shape.num_heads};
  recorder.dispatch({"segment_spectrum_pack", 2, sizeof(PackPush), {kWorkgroupSize, shape.head_dim, shape.dtype == Dtype::F16}},
                    {slice(args.states), work.slice(0, work.bytes())}, &pack,
                    std::min(group_count_unbounded(uint64_t(sequences) * shape.transform_length, kWorkgroupSize), kMaxGroups));
  plan.record(recorder, work.slice(0, segment_spectrum_work_bytes(shape)), false);
  const UnpackPush unpack{shape.transform_length, shape.num_bins, shape.num_heads, shape.scale};
  recorder.dispatch({"segment_spectrum_unpack", 3, sizeof(UnpackPush), {kWorkgroupSize, shape.head_dim}},
                    {work.slice(0, work.bytes()), slice(args.bins), slice(args.spectrum)}, &unpack,
                    std::min(group_count_unbounded(uint64_t(sequences) * shape.num_bins, kWorkgroupSize), kMaxGroups));
}

}  // namespace kvc::ops
