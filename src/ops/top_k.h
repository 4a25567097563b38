// Per-row top-k selection with a deterministic order: a higher key first, then the earlier
// position, where a key is (priority flag, score). The k selected positions of each row are
// written in ascending order, ready for a stable compaction. Scores must be non-negative and
// finite (attention probabilities and their sums, pooled or not), so their IEEE bits order
// as integers and the GPU and the CPU select exactly the same positions from the same input.
// The optional priority is HitKV's rule (Sec. "Hit-based KV Eviction Algorithm"): positions
// whose count reaches priority_min rank above all others, which then pad the row by score.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace kvc::ops {

struct TopKShape {
  uint32_t num_rows = 0;      // <= 65535
  uint32_t row_length = 0;    // positions per row
  uint32_t row_stride = 0;    // floats allocated per row in scores (and priority), >= row_length
  uint32_t k = 0;             // <= row_length
  uint32_t index_stride = 0;  // indices allocated per row in `indices`, >= k
  uint32_t priority_min = 0;  // with priority: counts >= priority_min rank first
  // Rows in blocks (the layers of one selection, each in its own aligned part of a buffer):
  // blocks of rows_per_block rows (0: all rows one block), block b's first row at
  // b * block_stride floats of scores (and priority) and b * index_block_stride indices.
  uint32_t rows_per_block = 0;
  uint32_t block_stride = 0;        // >= rows_per_block * row_stride
  uint32_t index_block_stride = 0;  // >= rows_per_block * index_stride
  // A k for each block (the layers of a PyramidKV or P-HitKV selection keep budgets of their
  // own): block b's rows keep block_k[b] positions, each <= k, which bounds index_stride.
  // Empty: every row keeps k. At most kTopKMaxBlockKs entries (they travel as push constants).
  std::vector<uint32_t> block_k;
};

// What 128 bytes of push constants hold beside the shape's other fields.
constexpr uint32_t kTopKMaxBlockKs = 23;

// How many positions row `row` keeps.
inline uint32_t top_k_row_k(const TopKShape& shape, uint32_t row) {
  if (shape.block_k.empty()) return shape.k;
  return shape.block_k[shape.rows_per_block ? row / shape.rows_per_block : 0];
}

// Where row `row` starts: in scores (and priority) with `stride` = row_stride and `block` =
// block_stride, in indices with index_stride and index_block_stride.
inline uint64_t top_k_row_start(const TopKShape& shape, uint32_t row, uint32_t stride, uint32_t block) {
  if (shape.rows_per_block == 0) return uint64_t(row) * stride;
  return uint64_t(row / shape.rows_per_block) * block + uint64_t(row % shape.rows_per_block) * stride;
}

// Row r of each operand starts where top_k_row_start says (row r x its stride without blocks).
struct TopKArgs {
  View scores;    // f32 rows of row_stride, >= 0
  View priority;  // optional uint32 rows, placed as the scores
  View indices;   // uint32 rows of index_stride: the row's first k are written, ascending
};

// Throws Error (KVC_ERROR_INVALID_ARGUMENT) when the shape breaks the limits above.
void check_top_k_shape(const TopKShape& shape);

void top_k(Backend& backend, const TopKShape& shape, const TopKArgs& args);
void top_k_cpu(const TopKShape& shape, const TopKArgs& args);
void top_k_vulkan(Backend& backend, const TopKShape& shape, const TopKArgs& args);

}  // namespace kvc::ops
