// Vulkan HiPPO-FourierT. Direct: sums over the segment (shaders/hippo_fourier_project.comp,
// hippo_fourier_fit.comp), O(N L) per dim like the references they are checked against.
// Transform: segment_spectrum then hippo_fourier_accumulate.comp for the projection;
// hippo_fourier_spectrum.comp, an inverse VkFFT and hippo_fourier_fit.comp reading its output
// for the fit, head by head through one plan of head_dim / 2 sequences of length T.
#include "ops/hippo_fourier.h"
#include "ops/hippo_project_vulkan.h"
#include "ops/segment_spectrum.h"
#include "ops/vulkan_args.h"
#include "vulkan/fft.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kProjectWorkgroup = 128;  // dims of a block of bins per workgroup: the shader's BINS x CHUNK
constexpr uint32_t kProjectBins = 8;         // the shader's BINS
constexpr uint32_t kFitWorkgroup = 64;      // a power of two: tokens per pass of one dim
// The Transform route's fit reads, where the Direct one computes: more loads in flight per
// dim (one head per dispatch leaves only head_dim workgroups).
constexpr uint32_t kReconstructedFitWorkgroup = 256;
constexpr uint32_t kChooseWorkgroup = 256;  // one thread per dim: head_dim <= 256
constexpr uint32_t kElementWorkgroup = 256; // the Transform route's element-wise kernels
constexpr uint32_t kMaxGroups = 65535;      // the least maxComputeWorkGroupCount[0]; those kernels loop past it

struct SegmentPush {
  uint32_t head_dim, num_states, window_length, num_dims, slot_stride, first_slot, length, first_index;
};

struct ProjectPush {
  SegmentPush segment;
  uint32_t second_num_dims, packed_stride;
};
static_assert(sizeof(ProjectPush) == 40, "hippo_fourier_project.comp's push block");

struct FitPush {
  SegmentPush segment;
  uint32_t first_head;
};

SegmentPush segment_push(const HippoFourierShape& shape, const HippoFourierSegment& segment) {
  return {shape.head_dim,          shape.num_states,   shape.window_length, shape.num_dims,
          segment.slot_stride,     segment.first_slot, segment.length,      segment.first_index};
}

vk::FftShape transform_shape(const HippoFourierShape& shape) { return {shape.window_length, shape.head_dim / 2}; }

void require_transform(const HippoFourierShape& shape) {
  // The segment inside the window: require_segment_in_window, before either route.
  require(shape.head_dim % 2 == 0 && uint64_t(2) * shape.num_states <= shape.window_length && shape.num_dims <= shape.head_dim,
          KVC_ERROR_INTERNAL, "hippo_fourier's Transform route needs an even head_dim and 2N <= T");
}

uint32_t element_groups(uint64_t items) { return std::min(group_count_unbounded(items, kElementWorkgroup), kMaxGroups); }

void project_transform(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                       const HippoFourierProjectArgs& args) {
  require_transform(shape);
  Tensor& spectrum = backend.scratch(ScratchId::HippoFourierSpectrum, size_t(shape.num_heads) * shape.num_states * shape.head_dim * 8);
  const SegmentSpectrumShape spectrum_shape{shape.num_heads,     shape.head_dim,      segment.slot_stride,
                                            segment.first_slot,  segment.length,      shape.window_length,
                                            segment.first_index, shape.num_states,    shape.dtype,
                                            static_cast<float>(1.0 / shape.window_length)};
  segment_spectrum(backend, spectrum_shape, {args.rows, args.bins, view(spectrum)});
  const uint32_t push[4] = {shape.head_dim, shape.num_states, shape.num_dims, shape.num_heads};
  backend.recorder().dispatch({"hippo_fourier_accumulate", 3, sizeof(push), {kElementWorkgroup}},
                              {slice(view(spectrum)), slice(args.dims), slice(args.coefficients)}, push,
                              element_groups(uint64_t(shape.num_heads) * shape.num_states * shape.num_dims));
}

void fit_transform(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment, const HippoFourierFitArgs& args) {
  require_transform(shape);
  vk::FftPlan& plan = backend.fft_plans().get(transform_shape(shape));
  vk::Recorder& recorder = backend.recorder();
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    const uint32_t spectrum_push[4] = {shape.num_states, shape.window_length, shape.num_dims, head};
    recorder.dispatch({"hippo_fourier_spectrum", 2, sizeof(spectrum_push), {kElementWorkgroup}},
                      {slice(args.coefficients), plan.data()}, spectrum_push,
                      element_groups(uint64_t(shape.num_dims + 1) / 2 * shape.window_length));
    plan.record(recorder, true);
    const FitPush push{segment_push(shape, segment), head};
    recorder.dispatch({"hippo_fourier_fit", 6, sizeof(FitPush), {kReconstructedFitWorkgroup, shape.dtype == Dtype::F16, true}},
                      {slice(args.rows), slice(args.dims), slice(args.coefficients), slice(args.affine), slice(args.squared_error),
                       plan.data()},
                      &push, shape.num_dims, 1);
  }
}

}  // namespace

std::shared_ptr<void> hippo_fourier_prepare_vulkan(Backend& backend, const HippoFourierShape& shape) {
  return backend.fft_plans().keep(transform_shape(shape));
}

void hippo_fourier_project_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                                  const HippoFourierProjectArgs& args) {
  if (shape.route == HippoFourierRoute::Transform) {
    project_transform(backend, shape, segment, args);
    return;
  }
  const HippoProjectPart part{shape.num_dims, args.rows, args.dims, args.coefficients, args.coefficients};
  record_hippo_project(backend, shape, segment, &part, 1, false, 0);
}

void record_hippo_project(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                          const HippoProjectPart* parts, uint32_t parts_count, bool fold, uint32_t packed_stride) {
  // Two parts only fold: the grid spans every dim then, so it covers both parts' projections.
  require((parts_count == 1 || (parts_count == 2 && fold)) && (!fold || packed_stride > 0), KVC_ERROR_INTERNAL,
          "hippo_fourier_project: two parts need the fold and the fold a packed middle");
  const HippoProjectPart& first = parts[0];
  const HippoProjectPart& second = parts[parts_count - 1];
  ProjectPush push{segment_push(shape, segment), second.num_dims, packed_stride};
  push.segment.num_dims = first.num_dims;
  // Fold: threads over every dim (the others pack); else over the projected ones.
  const uint32_t dim_blocks = ((fold ? shape.head_dim : first.num_dims) + kProjectWorkgroup - 1) / kProjectWorkgroup;
  backend.recorder().dispatch(
      {"hippo_fourier_project", 8, sizeof(ProjectPush), {kProjectWorkgroup, shape.dtype == Dtype::F16, fold}},
      {slice(first.rows), slice(first.dims), slice(first.coefficients), slice(second.rows), slice(second.dims),
       slice(second.coefficients), slice(first.packed), slice(second.packed)},
      &push, group_count(uint64_t((shape.num_states + kProjectBins - 1) / kProjectBins) * dim_blocks, 1), shape.num_heads,
      parts_count);
}

void hippo_fourier_fit_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                              const HippoFourierFitArgs& args) {
  if (shape.route == HippoFourierRoute::Transform) {
    fit_transform(backend, shape, segment, args);
    return;
  }
  const FitPush push{segment_push(shape, segment), 0};
  // The reconstruction binding is unused without RECONSTRUCTED: the coefficients stand in.
  backend.recorder().dispatch({"hippo_fourier_fit", 6, sizeof(FitPush), {kFitWorkgroup, shape.dtype == Dtype::F16, false}},
                              {slice(args.rows), slice(args.dims), slice(args.coefficients), slice(args.affine),
                               slice(args.squared_error), slice(args.coefficients)},
                              &push, shape.num_dims, shape.num_heads);
}

void hippo_fourier_choose_dims_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierChooseArgs& args) {
  const uint32_t push[2] = {shape.head_dim, shape.num_dims};
  backend.recorder().dispatch({"hippo_fourier_choose", 2, sizeof(push), {kChooseWorkgroup}},
                              {slice(args.squared_error), slice(args.dims)}, push, shape.num_heads);
}

}  // namespace kvc::ops
