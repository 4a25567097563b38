// Vulkan TreeKV prefill: one dispatch, one workgroup per kv head (shaders/tree_prefill.comp).
#include "ops/tree_prefill.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroup = 256;  // threads per kv head

struct TreePrefillPush {
  uint32_t slots_held, slot_stride, num_queries, sinks, recent_window, block, middle_first, blocks, budget, kept;
};

}  // namespace

void tree_prefill_vulkan(Backend& backend, const TreePrefillShape& shape, const TreePrefillArgs& args) {
  const TreeBlockLayout layout = tree_block_layout(shape);
  const TreePrefillPush push{shape.slots_held, shape.slot_stride, shape.num_queries, shape.sinks, shape.recent_window,
                             shape.block, layout.middle_first, layout.blocks, layout.budget, layout.kept};
  backend.recorder().dispatch(
      {"tree_prefill", 9, sizeof(TreePrefillPush), {kWorkgroup, shape.head_dim, shape.dtype == Dtype::F16, kMaxTreeBlocks}},
      {slice(args.k), slice(args.v), slice(args.positions), slice(args.scores), slice(args.k_out), slice(args.v_out),
       slice(args.score_sums), slice(args.score_counts), slice(args.scratch)},
      &push, shape.num_kv_heads);
}

}  // namespace kvc::ops
