// Vulkan FourierAttention decode: flash-decoding's split and merge around two transforms of
// one sequence per pair of query heads: fourier_query_coefficients (W = the pairs' a), the
// inverse transform (F^T a), attention_decode over the full rows and fourier_middle_partials
// over the middle (the middle's logits), the weights and the forward transform (F w),
// fourier_value_partials (the compressed dims' share) and attention_merge. Each query head's
// partials: the full rows' splits, the middle's, then the value blocks.
// The transforms take one of two routes:
// - pruned, where T = R B with B the least power of two >= 2N, a workgroup holds a B-point
//   run in shared memory (N <= 1024 with 48 KiB) and the forward transform's residue blocks,
//   which fourier_value_partials adds one after another, are few (kPrunedMaxBlocks):
//   W's 2N - 1 nonzero bins become the L logits by R short inverse DFTs
//   (fourier_logits_transform), and the weights their 2N - 1 bins by R short forward DFTs
//   (fourier_weights_transform, which forms the weights as it loads the logits): each a single
//   dispatch that touches each point once;
// - otherwise VkFFT's length-T transforms in place in their plan's buffer, W written whole
//   (zeros included) and the weights formed by fourier_middle_weights.
// KVC_FOURIER_TRANSFORM=length asks for the second route where the first applies, so that the
// two can be measured against each other: it is read per call, and a cache plans VkFFT's
// transforms when it is created only where it takes that route, so set it before.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ops/decode_split_vulkan.h"
#include "ops/fourier_attention.h"
#include "ops/vulkan_args.h"
#include "vulkan/fft.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroup = 256;          // the other shaders'
constexpr uint32_t kMaxGroupBlock = 8;        // KVC_MAX_GROUP_BLOCK
// fourier_middle_partials: 128 threads (256-token blocks) and about 528 workgroups, four an SM
// of an H100, each taking about two blocks at 32K and 8 kv heads: the fastest of the shapes
// measured (docs/benchmarks.md, 2026-11-27, fifteenth session).
constexpr uint32_t kMiddleWorkgroup = 128;
constexpr uint32_t kMiddleTargetGroups = 528;
constexpr uint32_t kCoefficientRows = 16;     // fourier_query_coefficients' ROWS
constexpr uint32_t kWeightPoints = 4;         // fourier_middle_weights' POINTS
// fourier_value_partials' BINS: 8 (64 workgroups a kv head at N = 512, each thread's chain of
// coefficient loads one batch) measured faster than 16 and 32 on the H100, the merge's extra
// partials included (docs/benchmarks.md, 2026-11-27, seventeenth session).
constexpr uint32_t kValueBins = 8;

// The pruned kernels' runs a workgroup: up to 4096 points (1024 threads) where B is shorter. On
// the H100 at T = 32768, B = 1024: 4096 a workgroup measured faster than 2048 and 1024
// (docs/benchmarks.md, 2026-11-27, seventeenth session).
constexpr uint32_t kPrunedPoints = 4096;
// At most this many residue blocks a pair: fourier_value_partials sums them serially (tiny N
// over a long window would make it thousands).
constexpr uint32_t kPrunedMaxBlocks = 64;

// VkFFT's route: one sequence of length T per pair of query heads.
vk::FftShape transform_shape(const FourierAttentionShape& shape) { return {shape.window_length, (shape.num_q_heads + 1) / 2}; }

// The pruned route's runs: B = 2^length_log2, `runs` of the R = T / B residues a workgroup of
// `threads`, `blocks` workgroups a pair; all 0 where the route does not apply.
struct PrunedTransform {
  explicit operator bool() const { return residues > 0; }
  uint32_t length_log2 = 0;
  uint32_t runs = 0;
  uint32_t threads = 0;
  uint32_t residues = 0;
  uint32_t blocks = 0;
};

PrunedTransform pruned_transform(Backend& backend, const FourierAttentionShape& shape) {
  const char* setting = std::getenv("KVC_FOURIER_TRANSFORM");
  if (setting != nullptr && std::strcmp(setting, "length") == 0) return {};
  uint64_t length = 2;  // B >= 2N >= 2
  uint32_t length_log2 = 1;
  for (; length < uint64_t(2) * shape.num_states; ++length_log2) length *= 2;
  if (length > shape.window_length || shape.window_length % length != 0) return {};
  PrunedTransform pruned;
  pruned.length_log2 = length_log2;
  pruned.residues = shape.window_length / length;
  pruned.runs = 1;
  while (2 * pruned.runs * length <= kPrunedPoints && 2 * pruned.runs <= pruned.residues) pruned.runs *= 2;
  // fourier_weights_transform's shared memory: the runs, the twiddles and a vec2 a thread for the maxima.
  const auto threads = [&] { return static_cast<uint32_t>(std::max<uint64_t>(32, pruned.runs * length / 4)); };
  const auto fits = [&] { return backend.device().fits_workgroup(threads(), (pruned.runs * length + length + threads()) * 8); };
  while (pruned.runs > 1 && !fits()) pruned.runs /= 2;
  pruned.blocks = (pruned.residues + pruned.runs - 1) / pruned.runs;
  if (!fits() || pruned.blocks > kPrunedMaxBlocks) return {};
  pruned.threads = threads();
  return pruned;
}

}  // namespace

std::shared_ptr<void> fourier_attention_prepare_vulkan(Backend& backend, const FourierAttentionShape& shape) {
  if (pruned_transform(backend, shape)) return nullptr;  // nothing to plan
  return backend.fft_plans().keep(transform_shape(shape));
}

bool fourier_attention_pruned_vulkan(Backend& backend, const FourierAttentionShape& shape) {
  return shape.num_middle > 0 && pruned_transform(backend, shape);
}

void fourier_attention_vulkan(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args) {
  const uint32_t dim = shape.head_dim, group = shape.num_q_heads / shape.num_kv_heads, heads = shape.num_q_heads;
  const uint32_t states = shape.num_states, middle = shape.num_middle, window = shape.window_length;
  const bool f16 = shape.dtype == Dtype::F16, has_middle = middle > 0;
  require(!has_middle || uint64_t(2) * states <= window, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "fourier_attention needs 2 num_states <= window_length (" + std::to_string(states) + ", " + std::to_string(window) + ")";
  });
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  // fourier_middle_partials: a thread per packed V dim in its step 3, so at least head_dim
  // threads; blocks of two tokens a thread.
  const uint32_t middle_workgroup = std::max(kMiddleWorkgroup, (dim + 31) / 32 * 32);
  // The largest divisor of the group up to kMaxGroupBlock (the shaders' register arrays) whose
  // shared memory in fourier_middle_partials (q_s, weight_s, reduce_s) the device gives.
  const auto middle_fits = [&](uint32_t block) {
    return backend.device().fits_workgroup(middle_workgroup, uint64_t(block) * (4 * dim + 12 * middle_workgroup));
  };
  uint32_t group_block = std::min(group, kMaxGroupBlock);
  while (group_block > 1 && (group % group_block != 0 || !middle_fits(group_block))) --group_block;
  require(middle_fits(group_block), KVC_ERROR_UNSUPPORTED, [&] {
    return "fourier_attention: the device's workgroups are too small for head_dim " + std::to_string(dim) + " (" +
           std::to_string(middle_workgroup) + " threads)";
  });
  const uint32_t head_blocks = group / group_block;
  vk::Recorder& recorder = backend.recorder();

  AttentionShape full;
  full.num_queries = 1;
  full.num_q_heads = heads;
  full.num_kv_heads = shape.num_kv_heads;
  full.head_dim = dim;
  full.num_slots = shape.num_full_slots;
  full.slot_stride = shape.slot_stride;
  full.dtype = shape.dtype;
  const uint32_t full_splits = decode_splits(full);
  const uint32_t middle_blocks = (middle + 2 * middle_workgroup - 1) / (2 * middle_workgroup);
  const uint32_t middle_splits = std::min(middle_blocks, std::max(1u, kMiddleTargetGroups / (shape.num_kv_heads * head_blocks)));

  const uint32_t value_blocks = has_middle ? (states + kValueBins - 1) / kValueBins : 0;
  const uint32_t num_splits = full_splits + middle_splits + value_blocks;

  Tensor& head_terms = backend.scratch(ScratchId::FourierHeadTerms, size_t(heads) * 2 * 4);
  Tensor& partials = backend.scratch(ScratchId::AttentionPartials, size_t(heads) * num_splits * (dim + 2) * 4);
  Tensor& lse = backend.scratch(ScratchId::AttentionLse, size_t(heads) * 4);
  const uint32_t pairs = (heads + 1) / 2;

  const PrunedTransform pruned = has_middle ? pruned_transform(backend, shape) : PrunedTransform{};
  vk::FftPlan* plan = has_middle && !pruned ? &backend.fft_plans().get(transform_shape(shape)) : nullptr;
  // W, the logits and F w: in the plan's buffer in turn, or W's nonzero bins (at n mod 2N), the
  // logits [pairs][T] and the blocks' shares of F w [pairs][blocks][2N] in scratch.
  vk::BufferSlice spectrum, logits, bins;
  const uint32_t spectrum_length = pruned ? 2 * states : window, spectrum_blocks = pruned ? pruned.blocks : 1;
  if (pruned) {
    spectrum = slice(view(backend.scratch(ScratchId::FourierSpectrum, size_t(pairs) * spectrum_length * 8)));
    logits = slice(view(backend.scratch(ScratchId::FourierLogits, size_t(pairs) * window * 8)));
    bins = slice(view(backend.scratch(ScratchId::FourierBins, size_t(pairs) * spectrum_blocks * spectrum_length * 8)));
  } else if (plan) {
    spectrum = logits = bins = plan->data();
  }
  if (has_middle) {
    // W's bins n and -n at n and spectrum_length - n; its zeros, where there are any, written.
    const struct {
      uint32_t num_q_heads, group_size, num_states, spectrum_length, compressed;
      float scale;
    } push{heads, group, states, spectrum_length, shape.k_compressed, scale};
    recorder.dispatch({"fourier_query_coefficients", 6, sizeof(push), {kWorkgroup, dim, f16}},
                      {slice(args.q), slice(args.k_dims), slice(args.k_coefficients), slice(args.k_affine), spectrum,
                       slice(view(head_terms))},
                      &push, pairs, (2 * states + kCoefficientRows - 1) / kCoefficientRows);
    if (pruned) {
      const uint32_t logits_push[4] = {states, window, middle, pruned.residues};
      recorder.dispatch({"fourier_logits_transform", 2, sizeof(logits_push), {pruned.threads, pruned.length_log2, pruned.runs}},
                        {spectrum, logits}, logits_push, pruned.blocks, pairs);
    } else {
      plan->record(recorder, true);  // W's inverse DFT: F^T a of both heads of every pair
    }
  }
  AttentionArgs full_args;
  full_args.q = args.q;
  full_args.k = args.k;
  full_args.v = args.v;
  record_decode_partials(backend, full, full_args, full_splits, view(partials), num_splits, View{});
  if (has_middle) {
    const struct {
      uint32_t num_middle, middle_stride, k_compressed, v_compressed, group_size, num_splits, first_split, partials_per_head,
          window_length;
      float scale;
    } push{middle, shape.middle_stride, shape.k_compressed, shape.v_compressed, group, middle_splits, full_splits, num_splits, window, scale};
    // The shader's PAIRED: both heads of every W sequence in one block, and a token pair's
    // 16 bytes aligned.
    const bool paired = group_block % 2 == 0 && window % 2 == 0;
    recorder.dispatch({"fourier_middle_partials", 8, sizeof(push), {middle_workgroup, dim, group_block, f16, paired}},
                      {slice(args.q), slice(args.k_middle), slice(args.v_middle), slice(args.k_dims), slice(args.v_dims), logits,
                       slice(view(head_terms)), slice(view(partials))},
                      &push, middle_splits, shape.num_kv_heads, head_blocks);
    if (pruned) {
      const uint32_t weights_push[8] = {heads, middle, window, full_splits, middle_splits, num_splits, states, pruned.residues};
      recorder.dispatch({"fourier_weights_transform", 4, sizeof(weights_push), {pruned.threads, dim, pruned.length_log2, pruned.runs}},
                        {slice(view(partials)), logits, slice(view(head_terms)), bins}, weights_push, pruned.blocks, pairs);
    } else {
      const uint32_t weights_push[6] = {heads, middle, window, full_splits, middle_splits, num_splits};
      recorder.dispatch({"fourier_middle_weights", 3, sizeof(weights_push), {kWorkgroup, dim}},
                        {slice(view(partials)), plan->data(), slice(view(head_terms))}, weights_push,
                        group_count(window, kWorkgroup * kWeightPoints), pairs);
      plan->record(recorder, false);  // F w at bins 0 .. N - 1, two heads per sequence
    }
    const uint32_t values_push[8] = {heads, group, states, spectrum_length, spectrum_blocks, shape.v_compressed,
                                     full_splits + middle_splits, num_splits};
    recorder.dispatch({"fourier_value_partials", 6, sizeof(values_push), {kWorkgroup, dim, group_block, kValueBins}},
                      {bins, slice(args.v_dims), slice(args.v_coefficients), slice(args.v_affine), slice(view(head_terms)),
                       slice(view(partials))},
                      values_push, value_blocks, shape.num_kv_heads, head_blocks);
  }
  recorder.dispatch({"attention_merge", 3, sizeof(num_splits), {kMergeWorkgroup, dim, f16}},
                    {slice(view(partials)), slice(args.out), slice(view(lse))}, &num_splits, heads, 1, merge_dim_blocks(dim));
}

}  // namespace kvc::ops
