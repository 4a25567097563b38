// decode_append on Vulkan: attention_decode_append's splits over the slots before the token
// and its token workgroups in one dispatch, then attention_merge over num_splits + 1 partials
// a query head.
#include <cmath>

#include "ops/decode_append.h"
#include "ops/decode_split_vulkan.h"
#include "ops/rotated_reads_vulkan.h"

namespace kvc::ops {
namespace {

struct DecodeAppendPush {
  uint32_t num_slots, slot_stride, num_splits, group_size;
  float scale;
  int32_t token_position;
};

}  // namespace

void decode_append_vulkan(Backend& backend, const AttentionShape& shape, const AttentionArgs& args, const AppendEntry& token) {
  // The splits cover the slots before the token's, as attention would split them.
  AttentionShape before = shape;
  before.num_slots = shape.num_slots - 1;
  const uint32_t num_splits = before.num_slots == 0 ? 0 : decode_splits(before);
  const uint32_t partials_per_head = num_splits + 1;
  Tensor& partials = backend.scratch(ScratchId::AttentionPartials, size_t(shape.num_q_heads) * partials_per_head * (shape.head_dim + 2) * 4);
  const RopeBindings rope = rope_bindings(shape.rope, args.positions, args.turn_table, args.k);
  const DecodeBlocks blocks = decode_blocks(shape);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
  const DecodeAppendPush push{before.num_slots, shape.slot_stride, num_splits, shape.num_q_heads / shape.num_kv_heads, scale,
                              token.shape.first_position};
  backend.recorder().dispatch(
      {"attention_decode_append", 11, sizeof(DecodeAppendPush),
       {kDecodeWorkgroup, shape.head_dim, blocks.group_block, shape.dtype == Dtype::F16, rope.style, rope.rotary_dims, false,
        shape.keys_rotated, decode_builtin_trig(backend, shape)}},
      {slice(args.q), slice(args.k), slice(args.v), rope.positions, rope.turns, slice(view(partials)), slice(token.args.k),
       slice(token.args.v), slice(args.k), slice(args.v), slice(args.positions)},
      &push, partials_per_head, shape.num_kv_heads, blocks.head_blocks);
  record_decode_merge(backend, shape, view(partials), partials_per_head, args.out,
                      view(backend.scratch(ScratchId::AttentionLse, size_t(shape.num_q_heads) * 4)));
}

}  // namespace kvc::ops
