// The reference: per kv head, the same f32 operations in the same order as the shader.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/tree_prefill.h"

namespace kvc::ops {
namespace {

// Observation-window queries that see rank `rank` (each sees the ranks up to its own).
uint32_t window_count(const TreePrefillShape& shape, uint32_t rank) {
  const uint32_t first_query = shape.slots_held - shape.num_queries;
  return shape.slots_held - (rank > first_query ? rank : first_query);
}

}  // namespace

TreeBlockLayout tree_block_layout(const TreePrefillShape& shape) {
  TreeBlockLayout layout;
  const uint32_t middle = shape.slots_held - shape.sinks - shape.recent_window;
  layout.blocks = middle / shape.block;
  layout.middle_first = shape.sinks + middle - layout.blocks * shape.block;
  layout.budget = (shape.capacity - shape.sinks - shape.recent_window) / shape.block;
  layout.kept = shape.sinks + shape.recent_window + std::min(layout.blocks, layout.budget) * shape.block;
  return layout;
}

void tree_prefill_cpu(const TreePrefillShape& shape, const TreePrefillArgs& args) {
  const TreeBlockLayout layout = tree_block_layout(shape);
  const uint32_t held = shape.slots_held, kept_total = layout.kept;
  const size_t row_bytes = size_t(shape.head_dim) * dtype_size(shape.dtype);
  for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head) {
    const size_t base = size_t(kv_head) * shape.slot_stride;
    int32_t* positions = args.positions.host<int32_t>() + base;
    const float* scores = args.scores.host<float>() + size_t(kv_head) * held;
    std::vector<uint32_t> slot_of_rank(held);
    for (uint32_t slot = 0; slot < held; ++slot) slot_of_rank[positions[slot]] = slot;
    std::vector<float> block_scores(layout.blocks);
    for (uint32_t block = 0; block < layout.blocks; ++block) {
      float sum = 0.0f;
      for (uint32_t i = 0; i < shape.block; ++i) {
        const uint32_t rank = layout.middle_first + block * shape.block + i;
        sum += scores[slot_of_rank[rank]] / float(window_count(shape, rank));
      }
      block_scores[block] = sum;
    }
    // Algorithm 1 over the blocks, as they arrive in order, with static scores.
    std::vector<uint32_t> tree;
    uint32_t idx = 0;  // 0-based scope start
    for (uint32_t block = 0; block < layout.blocks; ++block) {
      tree.push_back(block);
      if (tree.size() <= layout.budget) continue;
      if (layout.budget == 0) {
        tree.clear();
        continue;
      }
      const bool evict_right = block_scores[tree[idx]] > block_scores[tree[idx + 1]];
      tree.erase(tree.begin() + idx + (evict_right ? 1 : 0));
      idx = (idx + 1) % layout.budget;
    }
    std::vector<int32_t> new_start(layout.blocks, -1);
    for (size_t i = 0; i < tree.size(); ++i) new_start[tree[i]] = int32_t(shape.sinks + i * shape.block);
    for (uint32_t rank = 0; rank < held; ++rank) {
      int32_t new_rank = -1;
      if (rank < shape.sinks) new_rank = int32_t(rank);
      else if (rank >= held - shape.recent_window) new_rank = int32_t(kept_total - (held - rank));
      else if (rank >= layout.middle_first) {
        const uint32_t offset = rank - layout.middle_first, block = offset / shape.block;
        if (new_start[block] >= 0) new_rank = new_start[block] + int32_t(offset % shape.block);
      }
      if (new_rank < 0) continue;
      const uint32_t slot = slot_of_rank[rank];
      std::memcpy(args.k_out.host<unsigned char>() + (base + new_rank) * row_bytes,
                  args.k.host<unsigned char>() + (base + slot) * row_bytes, row_bytes);
      std::memcpy(args.v_out.host<unsigned char>() + (base + new_rank) * row_bytes,
                  args.v.host<unsigned char>() + (base + slot) * row_bytes, row_bytes);
      args.score_sums.host<float>()[base + new_rank] = scores[slot];
      args.score_counts.host<uint32_t>()[base + new_rank] = window_count(shape, rank);
    }
    for (uint32_t rank = 0; rank < kept_total; ++rank) positions[rank] = int32_t(rank);
  }
}

void tree_prefill(Backend& backend, const TreePrefillShape& shape, const TreePrefillArgs& args) {
  if (backend.is_cpu()) tree_prefill_cpu(shape, args);
  else tree_prefill_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
