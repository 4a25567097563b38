// Vulkan FourierAttention decode. Fused: shaders/fourier_attention_decode.comp writes one
// partial per (query head, split), attention_merge combines them, as flash-decoding does.
// Factorized: fourier_query_coefficients, a segment_spectrum (F^T a), fourier_logits,
// fourier_softmax, a segment_spectrum (F p), fourier_values and fourier_values_final.
#include <algorithm>
#include <cmath>

#include "ops/fourier_attention.h"
#include "ops/rotated_reads_vulkan.h"
#include "ops/segment_spectrum.h"
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
constexpr uint32_t kMergeWorkgroup = 128;     // attention_merge's (a power of two)
constexpr uint32_t kFactorWorkgroup = 128;    // a power of two: the reductions' workgroups
constexpr uint32_t kLogitsWorkgroup = 64;     // tokens per workgroup of fourier_logits
constexpr uint32_t kValueChunkTokens = 256;   // tokens per workgroup of fourier_values

struct DecodePush {
  uint32_t num_full_slots, slot_stride, query_position, num_middle, middle_stride, num_states, window_length, k_compressed,
      v_compressed, num_splits, group_size;
  float scale;
};

// The shader's shared memory for a block of query heads and a tile.
uint32_t shared_bytes(uint32_t head_dim, uint32_t group_block, uint32_t tile) {
  return 4 * (2 * group_block * head_dim + 2 * tile * head_dim + 2 * tile * kBinChunk + group_block * tile + 3 * group_block);
}

}  // namespace

std::shared_ptr<void> fourier_attention_prepare_vulkan(Backend& backend, const FourierAttentionShape& shape) {
  // Both transforms are one (p, 0) or (a_cos, a_sin) pair per query head, of length T.
  return backend.fft_plans().keep({shape.window_length, shape.num_q_heads});
}

namespace {

void record_factorized(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args) {
  require(!shape.rope.enabled(), KVC_ERROR_UNSUPPORTED, "fourier_attention's factorized route takes keys after RoPE (no rope)");
  const uint32_t dim = shape.head_dim, group = shape.num_q_heads / shape.num_kv_heads, heads = shape.num_q_heads;
  const uint32_t states = shape.num_states, middle = shape.num_middle, total = shape.num_full_slots + middle;
  const bool f16 = shape.dtype == Dtype::F16, has_middle = middle > 0;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  vk::Recorder& recorder = backend.recorder();
  auto middle_slice = [&](const View& operand) { return has_middle ? slice(operand) : slice(args.k); };

  Tensor& coefficients = backend.scratch(ScratchId::FourierQueryCoefficients, (size_t(heads) * 2 * states + heads) * 4);
  Tensor& key_spectrum = backend.scratch(ScratchId::FourierKeySpectrum, std::max<size_t>(size_t(heads) * middle * 16, 16));
  Tensor& logits = backend.scratch(ScratchId::AttentionLogits, size_t(heads) * total * 4);
  Tensor& probabilities = backend.scratch(ScratchId::FourierProbabilities, std::max<size_t>(size_t(heads) * middle * 8, 8));
  Tensor& value_spectrum = backend.scratch(ScratchId::FourierValueSpectrum, size_t(heads) * states * 16);
  if (has_middle) {
    const struct {
      uint32_t num_q_heads, group_size, num_states, compressed;
      float scale;
    } push{heads, group, states, shape.k_compressed, scale};
    recorder.dispatch({"fourier_query_coefficients", 5, sizeof(push), {kFactorWorkgroup, dim, f16}},
                      {slice(args.q), slice(args.k_dims), slice(args.k_coefficients), slice(args.k_affine), slice(view(coefficients))},
                      &push, heads);
    // (F^T a)[t] at the middle's tokens: the DFT of a's (cos, sin) halves at bins 0 .. L - 1,
    // every query head's in one transform (one row of 2 num_q_heads dims).
    segment_spectrum(backend, {1, 2 * heads, states, 0, states, shape.window_length, 0, middle, Dtype::F32, 1.0f},
                     {view(coefficients), args.bins, view(key_spectrum)});
  }
  {
    const struct {
      uint32_t num_full_slots, slot_stride, num_middle, middle_stride, num_q_heads, num_states, compressed;
      float scale;
    } push{shape.num_full_slots, shape.slot_stride, middle, shape.middle_stride, heads, states, shape.k_compressed, scale};
    recorder.dispatch({"fourier_logits", 7, sizeof(push), {kLogitsWorkgroup, dim, group, f16}},
                      {slice(args.q), slice(args.k), middle_slice(args.k_middle), middle_slice(args.k_dims), slice(view(key_spectrum)),
                       slice(view(coefficients)), slice(view(logits))},
                      &push, group_count(total, kLogitsWorkgroup), shape.num_kv_heads);
  }
  {
    const uint32_t push[3] = {shape.num_full_slots, middle, heads};
    recorder.dispatch({"fourier_softmax", 2, sizeof(push), {kFactorWorkgroup}}, {slice(view(logits)), slice(view(probabilities))}, push,
                      heads);
  }
  if (has_middle)  // F p at bins 0 .. N - 1
    segment_spectrum(backend, {1, 2 * heads, middle, 0, middle, shape.window_length, 0, states, Dtype::F32, 1.0f},
                     {view(probabilities), args.bins, view(value_spectrum)});
  const uint32_t chunks = (total + kValueChunkTokens - 1) / kValueChunkTokens;
  Tensor& partials = backend.scratch(ScratchId::AttentionPartials, size_t(heads) * chunks * dim * 4);
  const uint32_t value_workgroup = std::max(dim, 32u);
  {
    const uint32_t push[7] = {shape.num_full_slots, shape.slot_stride, middle, shape.middle_stride, shape.v_compressed, chunks,
                              kValueChunkTokens};
    recorder.dispatch({"fourier_values", 5, sizeof(push), {value_workgroup, dim, group, f16}},
                      {slice(args.v), middle_slice(args.v_middle), middle_slice(args.v_dims), slice(view(logits)), slice(view(partials))},
                      push, chunks, shape.num_kv_heads);
  }
  const uint32_t push[6] = {chunks, group, states, shape.v_compressed, has_middle ? 1u : 0u, heads};
  recorder.dispatch({"fourier_values_final", 6, sizeof(push), {value_workgroup, dim, f16}},
                    {slice(view(partials)), slice(view(value_spectrum)), middle_slice(args.v_dims), middle_slice(args.v_coefficients),
                     middle_slice(args.v_affine), slice(args.out)},
                    push, heads);
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
                    {slice(view(partials)), slice(args.out), slice(view(lse))}, &merge_push, shape.num_q_heads);
}

}  // namespace kvc::ops
