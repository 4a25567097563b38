// Vulkan FourierAttention decode. Fused: shaders/fourier_attention_decode.comp writes one
// partial per (query head, split), attention_merge combines them, as flash-decoding does.
// Factorized, flash-decoding's split and merge around two VkFFT transforms of one sequence per
// pair of query heads (their plan's buffer W holds every step's spectrum, logits and weights in
// turn): fourier_query_coefficients (W = the pairs' a), the inverse transform (F^T a),
// fourier_partials (the full rows' and the middle's partials; W = the middle's logits),
// fourier_middle_weights (W = their weights), the forward transform (F w),
// fourier_value_partials (the compressed dims' share) and attention_merge.
#include <algorithm>
#include <cmath>

#include "ops/fourier_attention.h"
#include "ops/decode_split_vulkan.h"
#include "ops/rotated_reads_vulkan.h"
#include "vulkan/fft.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroup = 128;
constexpr uint32_t kMaxGroupBlock = 8;        // query heads sharing one rebuilt tile
constexpr uint32_t kMaxTile = 16;             // tokens per tile
constexpr uint32_t kMinTile = 4;
constexpr uint32_t kBinChunk = 32;            // the shader's BIN_CHUNK
constexpr uint32_t kSharedBudget = 32 * 1024; // bytes: lavapipe's maxComputeSharedMemorySize
// Workgroups per dispatch: every middle tile costs O(N (|D^kc| + |D^vc|)) to rebuild, so the
// work spreads over as many workgroups as there are tiles, up to a few per SM of a large GPU.
constexpr uint32_t kTargetGroups = 512;
// The factorized route's kernels. fourier_partials: kFactorWorkgroup threads (the shader's
// MAX_WORDS assumes 256) stage tiles of at most kPartialsMaxTile tokens in kPartialsTileFloats
// floats (its MAX_TILE, TILE_FLOATS); about 1024 workgroups, each taking a few tiles in turn
// (an H200, kvc-bench's fourier_decode_step at 32K, twice in one call: 80.6 us a call with 512,
// 73.6 with 1024; 2048 and 4096 were slower; measured at 77 registers, before the f16 staging
// took 61). The others' blocks are their shaders' ROWS, POINTS and BINS.
constexpr uint32_t kFactorWorkgroup = 256;
constexpr uint32_t kMaxFactorGroupBlock = 8;  // KVC_MAX_GROUP_BLOCK
constexpr uint32_t kPartialsTileFloats = 4096;
constexpr uint32_t kPartialsMaxTile = 128;
constexpr uint32_t kFactorTargetGroups = 1024;
constexpr uint32_t kCoefficientRows = 16;     // fourier_query_coefficients' ROWS
constexpr uint32_t kWeightPoints = 4;         // fourier_middle_weights' POINTS
constexpr uint32_t kValueBins = 32;           // fourier_value_partials' BINS

struct DecodePush {
  uint32_t num_full_slots, slot_stride, query_position, num_middle, middle_stride, num_states, window_length, k_compressed,
      v_compressed, num_splits, group_size;
  float scale;
};

// Both transforms: one sequence of length T per pair of query heads.
vk::FftShape transform_shape(const FourierAttentionShape& shape) { return {shape.window_length, (shape.num_q_heads + 1) / 2}; }

// The factorized route's tile of `k_kept` and `v_kept` packed dims per row: as many tokens as
// fourier_partials' staging area holds, rows padded to an odd stride.
uint32_t factor_tile(uint32_t k_kept, uint32_t v_kept) {
  return std::min(kPartialsMaxTile, kPartialsTileFloats / std::max(k_kept | 1u, v_kept | 1u));
}

// The shader's shared memory for a block of query heads and a tile.
uint32_t shared_bytes(uint32_t head_dim, uint32_t group_block, uint32_t tile) {
  return 4 * (2 * group_block * head_dim + 2 * tile * head_dim + 2 * tile * kBinChunk + group_block * tile + 3 * group_block);
}

}  // namespace

std::shared_ptr<void> fourier_attention_prepare_vulkan(Backend& backend, const FourierAttentionShape& shape) {
  return backend.fft_plans().keep(transform_shape(shape));
}

namespace {

void record_factorized(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args) {
  require(!shape.rope.enabled(), KVC_ERROR_UNSUPPORTED, "fourier_attention's factorized route takes keys after RoPE (no rope)");
  const uint32_t dim = shape.head_dim, group = shape.num_q_heads / shape.num_kv_heads, heads = shape.num_q_heads;
  const uint32_t states = shape.num_states, middle = shape.num_middle, window = shape.window_length;
  const bool f16 = shape.dtype == Dtype::F16, has_middle = middle > 0;
  require(!has_middle || uint64_t(2) * states <= window, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "fourier_attention's factorized route needs 2 num_states <= window_length (" + std::to_string(states) + ", " +
           std::to_string(window) + ")";
  });
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  // The largest divisor of the group up to kMaxFactorGroupBlock (the shaders' register arrays).
  uint32_t group_block = std::min(group, kMaxFactorGroupBlock);
  while (group % group_block != 0) --group_block;
  const uint32_t head_blocks = group / group_block;
  vk::Recorder& recorder = backend.recorder();
  auto middle_slice = [&](const View& operand) { return has_middle ? slice(operand) : slice(args.k); };

  // Splits of the full rows and of the middle in proportion to the bytes each reads, about
  // kFactorTargetGroups workgroups in all, never more splits than tiles.
  const uint32_t full_tile = factor_tile(dim, dim);
  const uint32_t middle_tile = has_middle ? factor_tile(dim - shape.k_compressed, dim - shape.v_compressed) : 1;
  const uint32_t full_tiles = (shape.num_full_slots + full_tile - 1) / full_tile, middle_tiles = (middle + middle_tile - 1) / middle_tile;
  const uint32_t splits_wanted = std::max(2u, kFactorTargetGroups / (shape.num_kv_heads * head_blocks));
  const double full_bytes = double(shape.num_full_slots) * 2 * dim;
  const double middle_bytes = double(middle) * (2 * dim - shape.k_compressed - shape.v_compressed);
  const uint32_t full_splits = std::clamp(uint32_t(std::lround(splits_wanted * full_bytes / (full_bytes + middle_bytes))), 1u, full_tiles);
  const uint32_t middle_splits = has_middle ? std::clamp(splits_wanted - full_splits, 1u, middle_tiles) : 0;
  const uint32_t value_blocks = has_middle ? (states + kValueBins - 1) / kValueBins : 0;
  const uint32_t num_splits = full_splits + middle_splits + value_blocks;

  Tensor& head_terms = backend.scratch(ScratchId::FourierHeadTerms, size_t(heads) * 2 * 4);
  Tensor& full_logits = backend.scratch(ScratchId::AttentionLogits, size_t(heads) * shape.num_full_slots * 4);
  Tensor& partials = backend.scratch(ScratchId::AttentionPartials, size_t(heads) * num_splits * (dim + 2) * 4);
  Tensor& lse = backend.scratch(ScratchId::AttentionLse, size_t(heads) * 4);
  vk::FftPlan* plan = has_middle ? &backend.fft_plans().get(transform_shape(shape)) : nullptr;
  const vk::BufferSlice spectrum = has_middle ? plan->data() : slice(args.k);
  const uint32_t pairs = (heads + 1) / 2;

  if (has_middle) {
    const struct {
      uint32_t num_q_heads, group_size, num_states, window_length, compressed;
      float scale;
    } push{heads, group, states, window, shape.k_compressed, scale};
    recorder.dispatch({"fourier_query_coefficients", 6, sizeof(push), {kFactorWorkgroup, dim, f16}},
                      {slice(args.q), slice(args.k_dims), slice(args.k_coefficients), slice(args.k_affine), spectrum,
                       slice(view(head_terms))},
                      &push, pairs, (2 * states + kCoefficientRows - 1) / kCoefficientRows);
    plan->record(recorder, true);  // W's inverse DFT: F^T a of both heads of every pair
  }
  {
    const struct {
      uint32_t num_full_slots, slot_stride, num_middle, middle_stride, k_compressed, v_compressed, group_size, full_splits,
          middle_splits, num_splits, full_tile, middle_tile, window_length;
      float scale;
    } push{shape.num_full_slots, shape.slot_stride, middle,      shape.middle_stride, shape.k_compressed,
           shape.v_compressed,   group,             full_splits, middle_splits,       num_splits,
           full_tile,            middle_tile,       window,      scale};
    recorder.dispatch({"fourier_partials", 11, sizeof(push), {kFactorWorkgroup, dim, group_block, f16}},
                      {slice(args.q), slice(args.k), slice(args.v), middle_slice(args.k_middle), middle_slice(args.v_middle),
                       middle_slice(args.k_dims), middle_slice(args.v_dims), spectrum, slice(view(head_terms)),
                       slice(view(full_logits)), slice(view(partials))},
                      &push, full_splits + middle_splits, shape.num_kv_heads, head_blocks);
  }
  if (has_middle) {
    const uint32_t weights_push[6] = {heads, middle, window, full_splits, middle_splits, num_splits};
    recorder.dispatch({"fourier_middle_weights", 3, sizeof(weights_push), {kFactorWorkgroup, dim}},
                      {slice(view(partials)), spectrum, slice(view(head_terms))}, weights_push,
                      group_count(window, kFactorWorkgroup * kWeightPoints), pairs);
    plan->record(recorder, false);  // F w at bins 0 .. N - 1, two heads per sequence
    const uint32_t values_push[7] = {heads, group, states, window, shape.v_compressed, full_splits + middle_splits, num_splits};
    recorder.dispatch({"fourier_value_partials", 6, sizeof(values_push), {kFactorWorkgroup, dim, group_block}},
                      {spectrum, slice(args.v_dims), slice(args.v_coefficients), slice(args.v_affine), slice(view(head_terms)),
                       slice(view(partials))},
                      values_push, value_blocks, shape.num_kv_heads, head_blocks);
  }
  recorder.dispatch({"attention_merge", 3, sizeof(num_splits), {kMergeWorkgroup, dim, f16}},
                    {slice(view(partials)), slice(args.out), slice(view(lse))}, &num_splits, heads, 1, merge_dim_blocks(dim));
}

}  // namespace

void fourier_attention_vulkan(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args) {
  if (shape.route == FourierAttentionRoute::Factorized) {
    record_factorized(backend, shape, args);
    return;
  }
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads, dim = shape.head_dim;
  // The largest divisor of the group up to kMaxGroupBlock, and the largest tile, that fit.
  uint32_t group_block = std::min(group, kMaxGroupBlock), tile = kMaxTile;
  while (group % group_block != 0) --group_block;
  while (shared_bytes(dim, group_block, tile) > kSharedBudget) {
    if (tile > kMinTile) {
      tile /= 2;
    } else {
      do --group_block;
      while (group % group_block != 0);
    }
  }
  const uint32_t head_blocks = group / group_block;
  const uint32_t tiles = (shape.num_full_slots + tile - 1) / tile + (shape.num_middle + tile - 1) / tile;
  const uint32_t num_splits = std::min(tiles, std::max(1u, kTargetGroups / (shape.num_kv_heads * head_blocks)));

  const RopeBindings rope = rope_bindings(shape.rope, args.positions, args.turn_table, args.k);
  const bool f16 = shape.dtype == Dtype::F16;
  const bool middle = shape.num_middle > 0;
  auto middle_slice = [&](const View& operand) { return middle ? slice(operand) : slice(args.k); };
  Tensor& partials = backend.scratch(ScratchId::AttentionPartials, size_t(shape.num_q_heads) * num_splits * (dim + 2) * 4);
  Tensor& lse = backend.scratch(ScratchId::AttentionLse, size_t(shape.num_q_heads) * 4);
  const DecodePush push{shape.num_full_slots, shape.slot_stride,   static_cast<uint32_t>(shape.query_position),
                        shape.num_middle,     shape.middle_stride, shape.num_states,
                        shape.window_length,  shape.k_compressed,  shape.v_compressed,
                        num_splits,           group,               static_cast<float>(1.0 / std::sqrt(double(dim)))};
  vk::Recorder& recorder = backend.recorder();
  recorder.dispatch({"fourier_attention_decode", 14, sizeof(DecodePush),
                     {kWorkgroup, dim, group_block, tile, f16, rope.style, rope.rotary_dims, kBinChunk}},
                    {slice(args.q), slice(args.k), slice(args.v), rope.positions, rope.turns, middle_slice(args.k_middle),
                     middle_slice(args.v_middle), middle_slice(args.k_dims), middle_slice(args.v_dims),
                     middle_slice(args.k_coefficients), middle_slice(args.v_coefficients), middle_slice(args.k_affine),
                     middle_slice(args.v_affine), slice(view(partials))},
                    &push, num_splits, shape.num_kv_heads, head_blocks);
  const uint32_t merge_push = num_splits;
  recorder.dispatch({"attention_merge", 3, sizeof(merge_push), {kMergeWorkgroup, dim, f16}},
                    {slice(view(partials)), slice(args.out), slice(view(lse))}, &merge_push, shape.num_q_heads, 1, merge_dim_blocks(dim));
}

}  // namespace kvc::ops
