#include <algorithm>

#include "ops/chirp_z_vulkan.h"
#include "ops/segment_spectrum.h"
#include "ops/vulkan_args.h"
#include "vulkan/fft.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;
constexpr uint32_t kMaxGroups = 65535;  // the least maxComputeWorkGroupCount[0]; the shaders loop past it

struct PackPush {
  uint32_t slot_stride, first_slot, length, transform_length, window_offset, head, padded_length;
};

struct UnpackPush {
  uint32_t transform_length, num_bins, head, padded_length, span_first;
  float scale;
};

// The plan (chirp_z: the chirp-z transform's plan and filter) of the shape's transform.
ChirpTransform transform_for(Backend& backend, const SegmentSpectrumShape& shape) {
  const uint32_t sequences = shape.head_dim / 2;
  if (shape.chirp_z) return chirp_transform(backend, shape.transform_length, shape.span, sequences);
  return {backend.fft_plans().keep({shape.transform_length, sequences}), nullptr};
}

}  // namespace

std::shared_ptr<void> segment_spectrum_keep_vulkan(Backend& backend, const SegmentSpectrumShape& shape) {
  return std::make_shared<ChirpTransform>(transform_for(backend, shape));
}

// One head at a time through one plan: its data buffer is all the work memory the op needs.
void segment_spectrum_vulkan(Backend& backend, const SegmentSpectrumShape& shape, const SegmentSpectrumArgs& args) {
  const uint32_t sequences = shape.head_dim / 2;
  const ChirpTransform transform = transform_for(backend, shape);
  vk::FftPlan& plan = *transform.plan;
  const uint32_t padded = plan.shape().length;
  vk::Recorder& recorder = backend.recorder();
  // Without chirp_z the shaders never read the chirps: the bins stand in for them.
  const vk::BufferSlice chirp = shape.chirp_z ? transform.filter->chirp() : slice(args.bins);
  const vk::BufferSlice span_chirp = shape.chirp_z ? transform.filter->span_chirp() : slice(args.bins);
  const uint32_t span_first = shape.chirp_z ? transform.filter->span_first() : 0;
  // The pack shader's tiles: 2048 pairs' points each.
  require(shape.head_dim <= 256, KVC_ERROR_INTERNAL, "segment_spectrum packs heads of at most 256 dims");
  const uint32_t tile_points = 2048 / sequences;
  const uint32_t pack_groups = std::min(group_count_unbounded(padded, tile_points), kMaxGroups);
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    const PackPush pack{shape.slot_stride, shape.first_slot, shape.length, shape.transform_length, shape.window_offset, head, padded};
    recorder.dispatch({"segment_spectrum_pack", 3, sizeof(PackPush), {kWorkgroupSize, shape.head_dim, shape.dtype == Dtype::F16, shape.chirp_z}},
                      {slice(args.states), plan.data(), chirp}, &pack, pack_groups);
    if (shape.chirp_z) record_chirp_dft(recorder, transform, false);
    else plan.record(recorder, false);
    const UnpackPush unpack{shape.transform_length, shape.num_bins, head, padded, span_first, shape.scale};
    recorder.dispatch({"segment_spectrum_unpack", 4, sizeof(UnpackPush), {kWorkgroupSize, shape.head_dim, shape.chirp_z}},
                      {plan.data(), slice(args.bins), slice(args.spectrum), span_chirp}, &unpack,
                      std::min(group_count_unbounded(uint64_t(sequences) * shape.num_bins, kWorkgroupSize), kMaxGroups));
  }
}

}  // namespace kvc::ops
