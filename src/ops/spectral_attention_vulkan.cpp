// Per query: six passes and two transforms: bin products, their expansion to full spectra, an
// inverse DFT (the segment's logits), the softmax over them and the held slots (chunk
// statistics with the held slots' logits, then probabilities: a row's M logits spread over
// many workgroups), a forward DFT of the probabilities, and the value sum over the stored bins
// (in blocks, then their total). A pending token (shape.fold_excluded) enters the key states in
// the first query's bin products and the value states in its value sum, which read them
// anyway: folding it in a pass of its own read and wrote both tables once more. Two query heads
// share each complex transform (their logits and probabilities are real). Both length-M DFTs
// are chirp-z transforms over one plan (ops/chirp_z_vulkan.h; the inverse as the conjugate of a
// forward one, from the span of the stored bins and their mirrors to every point; the forward
// one from every point to the span), their chirps taken in the passes around them. A chunk of
// queries takes its queries in turn through the same plan, so one plan of num_q_heads / 2
// transforms per padded length serves every call, and every M of that padded length
// (spectral_attention_keep keeps it and the chirp filter).
#include <algorithm>
#include <cmath>

#include "ops/chirp_z_vulkan.h"
#include "ops/spectral_attention.h"
#include "ops/vulkan_args.h"
#include "vulkan/device.h"
#include "vulkan/fft.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;
constexpr uint32_t kSoftmaxWorkgroupSize = 256;
// Segment logits a softmax workgroup takes, and threads a bin in the bin products. A FAEDKV
// step on the H100 measured 1024 logits alike, 4096 3% slower; 8 or 32 threads a bin 1-2% slower.
constexpr uint32_t kSoftmaxChunk = 2048;
constexpr uint32_t kProductLanes = 16;
// Bins a value-sum workgroup adds up (for a whole query group), and at most each of its threads
// (MAX_BINS_PER_LANE). 16 bins a block measured 1.2% faster a FAEDKV step than 32 on the H100
// (twice the workgroups, half the states a thread holds).
constexpr uint32_t kValueBlockBins = 16;
constexpr uint32_t kValueBinsPerLane = 8;
constexpr uint32_t kMaxGroups = 65535;           // the least maxComputeWorkGroupCount[0]; the shaders loop past it
constexpr size_t kBindingAlignment = 256;        // the largest minStorageBufferOffsetAlignment Vulkan allows

struct ProductsPush {
  uint32_t num_bins, first_query, num_kv_heads, group, slot_stride, pending_slot, segment_length, folded_point;
  float folded;
};
struct ExpandPush {
  uint32_t num_bins, segment_length, rows, padded_length, span_first, span;
};
struct SoftmaxPush {
  uint32_t segment_length, padded_length, num_slots, slot_stride, num_q_heads, group, rows;
  float scale;
  uint32_t first_query;
  int32_t query_position;
  uint32_t excluded_slot;
};
struct ValueSumPush {
  uint32_t num_bins, segment_length, num_q_heads, group, num_blocks, padded_length, span_first, slot_stride, pending_slot,
      folded_point;
  float folded;
};
struct OutputPush {
  uint32_t rows, num_blocks, first_query, held_chunks;
};

size_t aligned(size_t bytes) { return (bytes + kBindingAlignment - 1) / kBindingAlignment * kBindingAlignment; }

// Two query rows per complex transform: their segment logits and probabilities are real.
ChirpTransform transform_for(Backend& backend, uint32_t segment_length, BinSpan span, uint32_t rows) {
  return chirp_transform(backend, segment_length, span, (rows + 1) / 2);
}

uint32_t groups_for(uint64_t items) { return std::min(group_count_unbounded(items, kWorkgroupSize), kMaxGroups); }

}  // namespace

std::shared_ptr<void> spectral_attention_keep_vulkan(Backend& backend, uint32_t segment_length, BinSpan span, uint32_t num_q_heads) {
  return std::make_shared<ChirpTransform>(transform_for(backend, segment_length, span, num_q_heads));
}

void spectral_attention_vulkan(Backend& backend, const SpectralAttentionShape& shape, const SpectralAttentionArgs& args) {
  const uint32_t rows = shape.num_q_heads, group = shape.num_q_heads / shape.num_kv_heads;  // one query's
  const uint32_t dim = shape.head_dim, M = shape.segment_length;
  // The value sum's threads take a dim pair each and split the block's bins.
  const uint32_t block_bins = std::min(kValueBlockBins, kValueBinsPerLane * (kWorkgroupSize / (dim / 2)));
  const uint32_t blocks = (shape.num_bins + block_bins - 1) / block_bins;
  const bool f16 = shape.dtype == Dtype::F16;
  const float scale = float(1.0 / std::sqrt(double(dim)));
  const ChirpTransform transform = transform_for(backend, M, shape.span, rows);
  const uint32_t padded = transform.filter->padded_length(), pairs = (rows + 1) / 2;
  const uint32_t span_first = transform.filter->span_first(), span = transform.filter->span();
  const vk::BufferSlice chirp = transform.filter->chirp(), span_chirp = transform.filter->span_chirp();
  // The spectra live in the plan's own buffer (the transforms run in place on it); the rest in
  // scratch: bin products, held logits, the held slots' share, the value sum's partials.
  const vk::BufferSlice spectra = transform.plan->data();
  const uint32_t chunks = (M + kSoftmaxChunk - 1) / kSoftmaxChunk;
  const size_t products_bytes = aligned(size_t(rows) * shape.num_bins * 8), held_logits_bytes = aligned(size_t(rows) * shape.num_slots * 4),
               held_bytes = aligned(size_t(rows) * chunks * dim * 4), statistics_bytes = aligned(size_t(rows) * chunks * 8),
               partials_bytes = size_t(rows) * blocks * dim * 4;
  Tensor& work = backend.scratch(ScratchId::SpectralAttentionWork,
                                 products_bytes + held_logits_bytes + held_bytes + statistics_bytes + partials_bytes);
  size_t offset = 0;
  auto carve = [&](size_t bytes) {
    offset += bytes;
    return work.slice(offset - bytes, bytes);
  };
  const vk::BufferSlice products = carve(products_bytes), held_logits = carve(held_logits_bytes), held = carve(held_bytes),
                        statistics = carve(statistics_bytes), partials = carve(partials_bytes);
  vk::Recorder& recorder = backend.recorder();
  const uint32_t folded_point = uint32_t(shape.folded % M), block_groups = std::min(blocks, kMaxGroups);

  for (uint32_t query = 0; query < shape.num_queries; ++query) {
    const bool fold = shape.fold_excluded && query == 0;
    const ProductsPush products_push{shape.num_bins, query,           shape.num_kv_heads, group,
                                     shape.slot_stride, shape.excluded_slot, M, folded_point, float(shape.folded)};
    const uint32_t product_blocks = (shape.num_bins + kWorkgroupSize / kProductLanes - 1) / (kWorkgroupSize / kProductLanes);
    recorder.dispatch({"spectral_bin_products", 5, sizeof(ProductsPush), {kWorkgroupSize, dim, f16, kProductLanes, fold}},
                      {slice(args.q), slice(args.spectrum_k), products, slice(args.k), slice(args.bins)}, &products_push,
                      std::min(product_blocks, kMaxGroups), shape.num_kv_heads);
    const ExpandPush expand_push{shape.num_bins, M, rows, padded, span_first, span};
    recorder.dispatch({"spectral_expand", 4, sizeof(ExpandPush), {kWorkgroupSize}}, {products, slice(args.bin_map), spectra, span_chirp},
                      &expand_push, groups_for(uint64_t(pairs) * padded));
    record_chirp_dft(recorder, transform, true);
    const SoftmaxPush softmax_push{M,     padded, shape.num_slots, shape.slot_stride, shape.num_q_heads, group, rows,
                                   scale, query,  shape.first_query_position + int32_t(query), shape.excluded_slot};
    for (const bool statistics_pass : {true, false})
      recorder.dispatch({"spectral_softmax", 9, sizeof(SoftmaxPush), {kSoftmaxWorkgroupSize, dim, f16, statistics_pass, kSoftmaxChunk}},
                        {held_logits, slice(args.v), spectra, held, statistics, chirp, slice(args.q), slice(args.k), slice(args.positions)},
                        &softmax_push, chunks, pairs);
    record_chirp_dft(recorder, transform, false);
    const ValueSumPush value_push{shape.num_bins, M, shape.num_q_heads, group, blocks, padded, span_first, shape.slot_stride,
                                  shape.excluded_slot, folded_point, float(shape.folded)};
    recorder.dispatch({"spectral_value_sum", 6, sizeof(ValueSumPush), {kWorkgroupSize, dim, block_bins, f16, fold}},
                      {slice(args.spectrum_v), slice(args.bins), spectra, partials, span_chirp, slice(args.v)}, &value_push,
                      block_groups, shape.num_kv_heads);
    const OutputPush output_push{rows, blocks, query, chunks};
    recorder.dispatch({"spectral_output", 3, sizeof(OutputPush), {kWorkgroupSize, dim, f16}}, {partials, held, slice(args.out)},
                      &output_push, rows);
  }
}

}  // namespace kvc::ops
