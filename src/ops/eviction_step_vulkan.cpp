#include "ops/eviction_step.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroup = 256;  // threads per kv head; a power of two (tree reduction)

struct EvictionPush {
  uint32_t slots_held, slot_stride, new_slots, num_queries, sinks, recent_window, evictions, tree_span, tree_first,
      num_kv_heads;
};

}  // namespace

void eviction_step_vulkan(Backend& backend, const EvictionShape& shape, const EvictionArgs& args) {
  const EvictionPush push{shape.slots_held, shape.slot_stride, shape.new_slots,     shape.num_queries, shape.sinks,
                          shape.recent_window, shape.evictions, shape.tree_span, shape.tree_first, shape.num_kv_heads};
  // Operands a rule never touches are absent; the positions buffer stands in for them.
  backend.recorder().dispatch(
      {"eviction_step", 6, sizeof(EvictionPush), {kWorkgroup, shape.head_dim, shape.dtype == Dtype::F16, uint32_t(shape.rule)}},
      {slice(args.k), slice(args.v), slice(args.positions), slice_or(args.scores, args.positions),
       slice_or(args.score_sums, args.positions), slice_or(args.score_counts, args.positions)},
      &push, shape.num_kv_heads);
}

}  // namespace kvc::ops
