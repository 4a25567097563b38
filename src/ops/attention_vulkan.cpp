// Vulkan attention: flash-decoding (split + merge) for one query, which rotates its query
// itself and writes its logits when scores are asked for (decode_scores turns them into
// scores); for a chunk, queries rotated and scaled once (rope op), the tiled causal kernel, then
// optionally attention_scores.
#include <algorithm>
#include <cmath>

#include "ops/attention.h"
#include "ops/rotated_reads_vulkan.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kDecodeWorkgroup = 128;
constexpr uint32_t kDecodePasses = 4;      // shaders/attention_decode.comp's PASSES
constexpr uint32_t kDecodeGroupBlock = 8;   // query heads sharing one read of K/V per workgroup
// Workgroups per decode dispatch: 512 (4 per SM of an H100) ran L = 32K at 80% of the copy
// bandwidth where 1024 and more ran at 67-70% (docs/benchmarks.md).
constexpr uint32_t kDecodeTargetGroups = 512;
constexpr uint32_t kMergeWorkgroup = 128;  // a power of two (the merge's tree reduction)
// attention_prefill: a workgroup is row groups x head_dim / 8 threads, 8 rows per row group;
// up to kPrefillThreads threads (at most 16 row groups: small heads would stage too many
// query rows per thread), which keeps its shared memory under 32 KiB for every head_dim.
constexpr uint32_t kPrefillThreads = 128;
constexpr uint32_t kPrefillMaxRowGroups = 16;
constexpr uint32_t kPrefillRowsPerGroup = 8;  // the shader's ROWS
constexpr uint32_t kScoresWorkgroup = 64;

struct DecodePush {
  uint32_t num_slots, slot_stride, num_splits, group_size;
  float scale;
};
struct MergePush {
  uint32_t num_splits;
};
struct DecodeScoresPush {
  uint32_t num_slots, group_size;
};
struct ChunkPush {
  uint32_t num_slots, slot_stride, num_queries, group_size, num_q_heads;
};

}  // namespace

void attention_vulkan(Backend& backend, const AttentionShape& shape, const AttentionArgs& args) {
  vk::Recorder& recorder = backend.recorder();
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  const uint32_t dim = shape.head_dim;
  const uint32_t first_chunk_slot = shape.num_slots - shape.num_queries;
  const bool f16 = shape.dtype == Dtype::F16;
  const RopeBindings rope = rope_bindings(shape.rope, args.positions, args.turn_table, args.k);
  const uint32_t rope_style = rope.style, rotary_dims = rope.rotary_dims;
  const vk::BufferSlice positions = rope.positions, turns = rope.turns;

  Tensor& lse = backend.scratch(ScratchId::AttentionLse, size_t(shape.num_queries) * shape.num_q_heads * 4);
  // The chunk kernels and their scores read queries rotated and scaled once, by the rope op;
  // decode rotates its single query itself (one dispatch less on the latency-bound path).
  const bool decode = shape.num_queries == 1;
  const bool needs_q_rot = !decode;
  Tensor* q_rot = nullptr;
  if (needs_q_rot) {
    q_rot = &backend.scratch(ScratchId::AttentionQuery, size_t(shape.num_queries) * shape.num_q_heads * dim * 4);
    rotate_queries(backend, {shape.num_queries, shape.num_q_heads, dim, shape.dtype, shape.rope}, args.q, args.positions,
                   first_chunk_slot, args.turn_table, *q_rot);
  }

  if (decode) {
    // The largest divisor of the group up to kDecodeGroupBlock: every head of a block is real,
    // so the shader's register arrays are only ever indexed by constants.
    uint32_t group_block = std::min(group, kDecodeGroupBlock);
    while (group % group_block != 0) --group_block;
    const uint32_t head_blocks = group / group_block;
    // As the shader's TILE: a key is read by head_dim / (elements per 16 bytes) threads at
    // once, and a tile is kDecodePasses such passes. Split s takes tiles s, s + num_splits, ...
    const uint32_t tile = kDecodePasses * (kDecodeWorkgroup / (dim / (f16 ? 8 : 4)));
    const uint32_t tiles = (shape.num_slots + tile - 1) / tile;
    const uint32_t num_splits = std::min(tiles, std::max(1u, kDecodeTargetGroups / (shape.num_kv_heads * head_blocks)));
    Tensor& partials = backend.scratch(ScratchId::AttentionPartials, size_t(shape.num_q_heads) * num_splits * (dim + 2) * 4);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
    // With scores, the decode kernel also writes every (query head, slot) logit, so the scores
    // need not read K again (a second pass over K, RoPE included, cost more than the attention).
    const bool with_logits = args.scores.tensor != nullptr;
    if (with_logits)
      require_within(size_product({shape.num_q_heads, shape.num_slots, sizeof(float)}), backend.tensor_limit(), "", [&] {
        return "decode scores' logits (" + std::to_string(shape.num_q_heads) + " query heads x " + std::to_string(shape.num_slots) + " slots x 4 bytes)";
      });
    Tensor& logits = backend.scratch(ScratchId::AttentionLogits, with_logits ? size_t(shape.num_q_heads) * shape.num_slots * 4 : 4);
    const DecodePush push{shape.num_slots, shape.slot_stride, num_splits, group, scale};
    recorder.dispatch({"attention_decode", 7, sizeof(DecodePush),
                       {kDecodeWorkgroup, dim, group_block, f16, rope_style, rotary_dims, with_logits}},
                      {slice(args.q), slice(args.k), slice(args.v), positions, turns, slice(view(partials)), slice(view(logits))},
                      &push, num_splits, shape.num_kv_heads, head_blocks);
    const MergePush merge{num_splits};
    recorder.dispatch({"attention_merge", 3, sizeof(MergePush), {kMergeWorkgroup, dim, f16}},
                      {slice(view(partials)), slice(args.out), slice(view(lse))}, &merge, shape.num_q_heads);
    if (with_logits) {
      const DecodeScoresPush scores_push{shape.num_slots, group};
      recorder.dispatch({"decode_scores", 3, sizeof(DecodeScoresPush), {kScoresWorkgroup}},
                        {slice(view(logits)), slice(view(lse)), slice(args.scores)}, &scores_push,
                        group_count(shape.num_slots, kScoresWorkgroup), shape.num_kv_heads);
    }
  } else {
    const uint32_t columns = dim / 8;
    const uint32_t row_groups = std::min(kPrefillMaxRowGroups, kPrefillThreads / columns);
    const ChunkPush push{shape.num_slots, shape.slot_stride, shape.num_queries, group, shape.num_q_heads};
    recorder.dispatch({"attention_prefill", 7, sizeof(ChunkPush), {row_groups * columns, dim, f16, rope_style, rotary_dims}},
                      {slice(view(*q_rot)), slice(args.k), slice(args.v), positions, turns, slice(args.out), slice(view(lse))},
                      &push, group_count(uint64_t(shape.num_queries) * group, row_groups * kPrefillRowsPerGroup),
                      shape.num_kv_heads);
  }

  if (!decode && args.scores) {
    const ChunkPush push{shape.num_slots, shape.slot_stride, shape.num_queries, group, shape.num_q_heads};
    recorder.dispatch({"attention_scores", 6, sizeof(ChunkPush), {kScoresWorkgroup, dim, f16, rope_style, rotary_dims}},
                      {slice(view(*q_rot)), slice(args.k), positions, turns, slice(view(lse)), slice(args.scores)}, &push,
                      group_count(shape.num_slots, kScoresWorkgroup), shape.num_kv_heads);
  }
}

}  // namespace kvc::ops
