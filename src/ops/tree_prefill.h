// TreeKV's prefill variant (§4.2): a prompt longer than the cache size c is cut into blocks of
// b tokens, each block scored by the averaged importance (S / C, as in decoding) its tokens
// get from the observation window (the prompt's last queries, following SnapKV), and
// Algorithm 1 runs once over the blocks with those static scores and a budget of
// floor(m / b) blocks, m = c - sinks - recent_window. The sinks and the recent window stay.
// The middle region's oldest (length mod b) tokens, which fill no whole block, are dropped so
// that the kept count is known on the host: sinks + recent_window + min(blocks, budget) * b.
// The kept tokens are written in rank order to slots 0..kept-1 of k_out / v_out, their
// positions become their new ranks, and S, C restart from the window's sums and counts.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

// Blocks one workgroup's tree can hold (two words each of shared memory, within lavapipe's
// 32 KiB): floor(m / b) must stay below this.
constexpr uint32_t kMaxTreeBlocks = 2048;

struct TreePrefillShape {
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;      // multiple of 8
  uint32_t slot_stride = 0;
  Dtype dtype = Dtype::F32;   // of k and v
  uint32_t slots_held = 0;    // > capacity
  uint32_t num_queries = 0;   // the observation window: the newest num_queries ranks' queries
  uint32_t sinks = 0;
  uint32_t recent_window = 0;
  uint32_t capacity = 0;      // c
  uint32_t block = 0;         // b
};

// Where the blocks lie, by rank, and how many tokens stay:
// sinks + recent_window + min(blocks, budget) * b.
struct TreeBlockLayout {
  uint32_t middle_first = 0;  // rank of block 0's first token (after the dropped remainder)
  uint32_t blocks = 0;        // whole blocks in the middle region
  uint32_t budget = 0;        // blocks the tree keeps: floor(m / b)
  uint32_t kept = 0;          // tokens kept
};
TreeBlockLayout tree_block_layout(const TreePrefillShape& shape);

struct TreePrefillArgs {
  View k, v;              // [num_kv_heads][slot_stride][head_dim], slots in any order
  View positions;         // int32 [num_kv_heads][slot_stride]: ranks in, new ranks out
  View scores;            // f32 [num_kv_heads][slots_held]: the window's attention per slot
  View k_out, v_out;      // like k and v, must not overlap them
  View score_sums;        // f32 [num_kv_heads][slot_stride] out: S by new rank
  View score_counts;      // uint32 [num_kv_heads][slot_stride] out: C by new rank
  View scratch;           // 3 * num_kv_heads * slot_stride words
};

void tree_prefill(Backend& backend, const TreePrefillShape& shape, const TreePrefillArgs& args);
void tree_prefill_cpu(const TreePrefillShape& shape, const TreePrefillArgs& args);
void tree_prefill_vulkan(Backend& backend, const TreePrefillShape& shape, const TreePrefillArgs& args);

}  // namespace kvc::ops
