#include <algorithm>

#include "ops/spectral_fold.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;
constexpr uint32_t kMaxGroups = 65535;  // the least maxComputeWorkGroupCount[0]; the shader loops past it

struct FoldPush {
  uint32_t slot_stride, num_bins, segment_length, num_tokens, ring_first_slot, ring_slots, ring_start, num_heads, folded_point;
  float folded;
};

}  // namespace

void spectral_fold_vulkan(Backend& backend, const SpectralFoldShape& shape, const SpectralFoldArgs& args) {
  const FoldPush push{shape.slot_stride, shape.num_bins,        shape.segment_length,
                      shape.num_tokens,  shape.ring_first_slot, shape.ring_slots,
                      shape.ring_start,  shape.num_heads,       uint32_t(shape.folded % shape.segment_length),
                      float(shape.folded)};
  backend.recorder().dispatch({"spectral_fold", 5, sizeof(FoldPush), {kWorkgroupSize, shape.head_dim, shape.dtype == Dtype::F16}},
                              {slice(args.k), slice(args.v), slice(args.bins), slice(args.spectrum_k), slice(args.spectrum_v)}, &push,
                              std::min(group_count_unbounded(uint64_t(shape.num_heads) * shape.num_bins * shape.head_dim, kWorkgroupSize), kMaxGroups));
}

}  // namespace kvc::ops
