// Vulkan HiPPO-FourierT: direct sums over the segment (shaders/hippo_fourier_project.comp,
// hippo_fourier_fit.comp), O(N L) per dim like the references they are checked against.
#include "ops/hippo_fourier.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kProjectWorkgroup = 64;  // dims of one bin per workgroup
constexpr uint32_t kFitWorkgroup = 64;      // a power of two: tokens per pass of one dim
constexpr uint32_t kChooseWorkgroup = 256;  // one thread per dim: head_dim <= 256

struct SegmentPush {
  uint32_t head_dim, num_states, window_length, num_dims, slot_stride, first_slot, length, first_index;
};

SegmentPush segment_push(const HippoFourierShape& shape, const HippoFourierSegment& segment) {
  return {shape.head_dim,          shape.num_states,   shape.window_length, shape.num_dims,
          segment.slot_stride,     segment.first_slot, segment.length,      segment.first_index};
}

}  // namespace

void hippo_fourier_project_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                                  const HippoFourierProjectArgs& args) {
  const SegmentPush push = segment_push(shape, segment);
  const uint32_t dim_blocks = (shape.num_dims + kProjectWorkgroup - 1) / kProjectWorkgroup;
  backend.recorder().dispatch({"hippo_fourier_project", 3, sizeof(SegmentPush), {kProjectWorkgroup, shape.dtype == Dtype::F16}},
                              {slice(args.rows), slice(args.dims), slice(args.coefficients)}, &push,
                              group_count(uint64_t(shape.num_states) * dim_blocks, 1), shape.num_heads);
}

void hippo_fourier_fit_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                              const HippoFourierFitArgs& args) {
  const SegmentPush push = segment_push(shape, segment);
  backend.recorder().dispatch({"hippo_fourier_fit", 5, sizeof(SegmentPush), {kFitWorkgroup, shape.dtype == Dtype::F16}},
                              {slice(args.rows), slice(args.dims), slice(args.coefficients), slice(args.affine),
                               slice(args.squared_error)},
                              &push, shape.num_dims, shape.num_heads);
}

void hippo_fourier_choose_dims_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierChooseArgs& args) {
  const uint32_t push[2] = {shape.head_dim, shape.num_dims};
  backend.recorder().dispatch({"hippo_fourier_choose", 2, sizeof(push), {kChooseWorkgroup}},
                              {slice(args.squared_error), slice(args.dims)}, push, shape.num_heads);
}

}  // namespace kvc::ops
