// How flash-decoding (attention_decode and attention_decode_batch, merged by attention_merge
// and attention_merge_batch) divides a cache's slots among workgroups; used by the ops'
// Vulkan implementations only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/backend.h"
#include "ops/attention.h"
#include "vulkan/device.h"
#include "vulkan/trig_precision.h"

namespace kvc::ops {

constexpr uint32_t kDecodeWorkgroup = 128;
constexpr uint32_t kDecodePasses = 4;      // shaders/include/decode_split.glsl's PASSES
constexpr uint32_t kDecodeGroupBlock = 8;  // query heads sharing one read of K/V per workgroup
// Workgroups per decode dispatch: 512 (4 per SM of an H100) ran L = 32K at 80% of the copy
// bandwidth where 1024 and more ran at 67-70% (docs/benchmarks.md).
constexpr uint32_t kDecodeTargetGroups = 512;
// Tiles a split takes (at most, the tiles spread evenly) where a cache has more tiles than the
// budget has splits but not many more (2K to 8K slots at head_dim 128): a workgroup's fixed
// work (its query read, rotated and scaled, the key lanes' combination, its partial row)
// outweighs two tiles' slots. H200, 32-layer steps at 4K slots (129 tiles), 33 splits a kv head
// (3 or 4 tiles each) against 64 (2 or 3): FULL 676 -> 657 us of GPU time in a model's order,
// FreqKV 816 -> 615, H2O 1047 -> 801. Where the budget covers every tile a split takes one: at
// 1K (33 tiles) 32 splits, one of them two tiles' work, took 520 us for FULL's decode step
// against 33 splits' 497, and 9 splits of 4 tiles 542 (docs/benchmarks.md).
constexpr uint32_t kDecodeSplitTiles = 4;
constexpr uint32_t kMergeWorkgroup = 128;  // a power of two (the merge's fold, merge_splits.glsl)

// Workgroups per query head in a merge (shaders/include/merge_splits.glsl), each taking an
// equal share of the head's chunks of 4 dims (head_dim / 4 of them, even): 4 where they divide,
// so 32 query heads take 128 workgroups, about one an SM of a large GPU (each recomputes the
// head's statistics, so more would repeat more reads); else 2.
inline uint32_t merge_dim_blocks(uint32_t head_dim) { return (head_dim / 4) % 4 == 0 ? 4 : 2; }

struct DecodeBlocks {
  uint32_t group_block;  // query heads per workgroup, the shader's GROUP_BLOCK
  uint32_t head_blocks;  // workgroups per kv head and split
  uint32_t tile;         // slots per tile, the shader's TILE
};

inline DecodeBlocks decode_blocks(const AttentionShape& shape) {
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  // The largest divisor of the group up to kDecodeGroupBlock: every head of a block is real,
  // so the shader's register arrays are only ever indexed by constants.
  uint32_t group_block = std::min(group, kDecodeGroupBlock);
  while (group % group_block != 0) --group_block;
  // As the shader's TILE: a key is read by head_dim / (elements per 16 bytes) threads at once,
  // and a tile is kDecodePasses such passes. Split s takes tiles s, s + num_splits, ...
  const uint32_t elements_per_chunk = shape.dtype == Dtype::F16 ? 8 : 4;
  return {group_block, group / group_block, kDecodePasses * (kDecodeWorkgroup / (shape.head_dim / elements_per_chunk))};
}

// The decode kernels' BUILTIN_TRIG: whether the keys they rotate as read (RoPE, keys not stored
// rotated) take the device's built-in cos and sin (vulkan/trig_precision.h).
inline bool decode_builtin_trig(Backend& backend, const AttentionShape& shape) {
  return shape.key_rope().enabled() && vk::rotates_by_builtin_trig(backend.device());
}

inline uint32_t decode_tiles(const AttentionShape& shape, const DecodeBlocks& blocks) {
  return (shape.num_slots + blocks.tile - 1) / blocks.tile;
}

// Splits of `tiles` tiles within `budget` splits: a tile each where the budget covers them,
// else kDecodeSplitTiles tiles or fewer each, but no fewer than half the budget's splits.
inline uint32_t decode_split_count(uint32_t tiles, uint32_t budget) {
  if (tiles <= budget) return std::max(1u, tiles);
  return std::min(budget, std::max(std::max(1u, budget / 2), (tiles + kDecodeSplitTiles - 1) / kDecodeSplitTiles));
}

// Splits of the whole dispatch: about kDecodeTargetGroups workgroups.
inline uint32_t decode_split_budget(const AttentionShape& shape, const DecodeBlocks& blocks) {
  return std::max(1u, kDecodeTargetGroups / (shape.num_kv_heads * blocks.head_blocks));
}

// Flash-decoding's first pass for one query (attention_decode) recorded, with its logits where
// args asks for scores or logits; what its merge reads: the partial rows ([num_q_heads]
// [num_splits][head_dim + 2]), how many per query head, and where the logits went.
struct DecodeSplits {
  View partials;
  uint32_t num_splits;
  View logits;
};
DecodeSplits record_decode_splits(Backend& backend, const AttentionShape& shape, const AttentionArgs& args);

// The splits record_decode_splits makes of shape's slots.
uint32_t decode_splits(const AttentionShape& shape);

// attention_decode alone, into a caller's partials: split s of query head h at row
// h * partials_per_head + s of `partials` ([num_q_heads][partials_per_head][head_dim + 2]), the
// rows past num_splits left to other kernels; the logits into `logits` where it is set.
void record_decode_partials(Backend& backend, const AttentionShape& shape, const AttentionArgs& args, uint32_t num_splits,
                            View partials, uint32_t partials_per_head, View logits);

// attention_merge: each query head's partials_per_head partial rows of `partials` into its
// output row and log-sum-exp.
void record_decode_merge(Backend& backend, const AttentionShape& shape, View partials, uint32_t partials_per_head, View out, View lse);

}  // namespace kvc::ops
