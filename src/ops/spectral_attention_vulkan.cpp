// Four passes and two transforms: bin products, their expansion to full spectra, an inverse
// FFT (the segment's logits), the softmax with the held slots, a forward FFT of the
// probabilities, and the value sum over the stored bins.
#include <algorithm>
#include <cmath>

#include "ops/spectral_attention.h"
#include "ops/vulkan_args.h"
#include "vulkan/fft.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;
constexpr uint32_t kSoftmaxWorkgroupSize = 128;  // a power of two, >= 32 (the held-output registers)
constexpr uint32_t kMaxGroups = 65535;           // the least maxComputeWorkGroupCount[0]; the shaders loop past it

struct ProductsPush {
  uint32_t num_bins, rows, num_q_heads, group;
};
struct ExpandPush {
  uint32_t num_bins, segment_length, rows;
};
struct SoftmaxPush {
  uint32_t segment_length, num_slots, slot_stride, num_q_heads, group;
  int32_t first_query_position;
  float scale;
};
struct ValueSumPush {
  uint32_t num_bins, segment_length, rows, num_q_heads, group;
};

uint32_t groups_for(uint64_t items) { return std::min(group_count_unbounded(items, kWorkgroupSize), kMaxGroups); }

}  // namespace

void spectral_attention_vulkan(Backend& backend, const SpectralAttentionShape& shape, const SpectralAttentionArgs& args) {
  const uint32_t rows = shape.num_queries * shape.num_q_heads, group = shape.num_q_heads / shape.num_kv_heads;
  const uint32_t dim = shape.head_dim, M = shape.segment_length;
  const bool f16 = shape.dtype == Dtype::F16;
  vk::FftPlan& plan = backend.fft_plans().get({M, rows});
  // The spectra live in the plan's own buffer (the transforms run in place on it); the bin
  // products and the held slots' share in scratch.
  const vk::BufferSlice spectra = plan.data();
  const size_t products_bytes = size_t(rows) * shape.num_bins * 8;
  Tensor& work = backend.scratch(ScratchId::SpectralAttentionWork, products_bytes + size_t(rows) * dim * 4);
  const vk::BufferSlice products = work.slice(0, products_bytes);
  const vk::BufferSlice held = work.slice(products_bytes, size_t(rows) * dim * 4);
  vk::Recorder& recorder = backend.recorder();

  const ProductsPush products_push{shape.num_bins, rows, shape.num_q_heads, group};
  recorder.dispatch({"spectral_bin_products", 3, sizeof(ProductsPush), {kWorkgroupSize, dim, f16}},
                    {slice(args.q), slice(args.spectrum_k), products}, &products_push, groups_for(uint64_t(rows) * shape.num_bins));
  const ExpandPush expand_push{shape.num_bins, M, rows};
  recorder.dispatch({"spectral_expand", 3, sizeof(ExpandPush), {kWorkgroupSize}}, {products, slice(args.bin_map), spectra},
                    &expand_push, groups_for(uint64_t(rows) * M));
  plan.record(recorder, true);
  const SoftmaxPush softmax_push{M, shape.num_slots, shape.slot_stride, shape.num_q_heads, group, shape.first_query_position,
                                 float(1.0 / std::sqrt(double(dim)))};
  recorder.dispatch({"spectral_softmax", 6, sizeof(SoftmaxPush), {kSoftmaxWorkgroupSize, dim, f16}},
                    {slice(args.q), slice(args.k), slice(args.v), slice(args.positions), spectra, held}, &softmax_push, rows);
  plan.record(recorder, false);
  const ValueSumPush value_push{shape.num_bins, M, rows, shape.num_q_heads, group};
  recorder.dispatch({"spectral_value_sum", 5, sizeof(ValueSumPush), {kWorkgroupSize, dim, f16}},
                    {slice(args.spectrum_v), slice(args.bins), spectra, held, slice(args.out)}, &value_push,
                    groups_for(uint64_t(rows) * dim / 2));
}

}  // namespace kvc::ops
