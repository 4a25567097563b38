// Vulkan FourierAttention decode: shaders/fourier_attention_decode.comp writes one partial per
// (query head, split), attention_merge combines them, as flash-decoding does.
#include <algorithm>
#include <cmath>

#include "ops/fourier_attention.h"
#include "ops/rotated_reads_vulkan.h"

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

void fourier_attention_vulkan(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args) {
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
