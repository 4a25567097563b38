// Vulkan eviction step: one dispatch per layer, one workgroup per kv head (shaders/eviction_step.comp),
// which also forms the scores from decode logits (no decode_scores dispatch before it); a
// STREAMING decode step's single eviction takes shaders/evict_oldest.comp, a thread a slot,
// which may also be decode attention's merge (record_eviction's `merge`).
#include <algorithm>

#include "ops/decode_split_vulkan.h"
#include "ops/eviction_step_vulkan.h"
#include "ops/vulkan_args.h"
#include "vulkan/device.h"

namespace kvc::ops {
namespace {

// Threads per kv head (one workgroup each, so that a pass over the slots needs no global
// synchronisation): about kSlotsPerThread slots each keeps every pass a few loads deep on a
// large cache and a small cache cheap; a power of two the device allows.
constexpr uint32_t kMinWorkgroup = 64, kMaxWorkgroup = 1024, kSlotsPerThread = 4;
constexpr uint32_t kOldestWorkgroup = 256;  // evict_oldest: a thread a slot

uint32_t workgroup_size(const vk::Device& device, uint32_t slots) {
  const VkPhysicalDeviceLimits& limits = device.properties().limits;
  const uint32_t most = std::min({kMaxWorkgroup, limits.maxComputeWorkGroupInvocations, limits.maxComputeWorkGroupSize[0]});
  uint32_t size = kMinWorkgroup;
  while (size * kSlotsPerThread < slots && size * 2 <= most) size *= 2;
  return size;
}

struct EvictionPush {
  uint32_t slots_held, slot_stride, new_slots, num_queries, sinks, recent_window, evictions, tree_span, tree_first,
      num_kv_heads, group_size;
};
struct OldestPush {
  uint32_t slots_held, slot_stride, sinks, num_splits, merge_groups, merge_blocks;
};

}  // namespace

bool eviction_merges(const EvictionShape& shape) { return shape.rule == EvictionRule::Oldest && shape.evictions == 1; }

void record_eviction(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings* merge) {
  require(!merge || eviction_merges(shape), KVC_ERROR_INTERNAL, "an eviction step that cannot merge given a merge");
  vk::Recorder& recorder = backend.recorder();
  const bool f16 = shape.dtype == Dtype::F16;
  if (eviction_merges(shape)) {  // a STREAMING decode step: no pass waits on another
    const uint32_t workgroup = merge ? kMergeWorkgroup : kOldestWorkgroup;  // a merge's workgroup is the merge's size
    const uint32_t merge_blocks = merge_dim_blocks(shape.head_dim);
    // Per kv head (the grid's y): its query heads' merge workgroups, then its slot blocks.
    const uint32_t merge_groups = merge ? shape.num_q_heads / shape.num_kv_heads * merge_blocks : 0;
    const uint32_t groups_x = group_count(uint64_t(merge_groups) * workgroup + shape.slots_held, workgroup);
    // Without a merge its bindings are absent; the positions buffer stands in for them.
    const vk::BufferSlice partials = merge ? slice(merge->partials) : slice(args.positions);
    const vk::BufferSlice out = merge ? slice(merge->out) : slice(args.positions);
    const vk::BufferSlice lse = merge ? slice(merge->lse) : slice(args.positions);
    const OldestPush push{shape.slots_held, shape.slot_stride, shape.sinks, merge ? merge->num_splits : 0u, merge_groups, merge_blocks};
    recorder.dispatch({"evict_oldest", 6, sizeof(push), {workgroup, shape.head_dim, f16, merge != nullptr}},
                      {slice(args.k), slice(args.v), slice(args.positions), partials, out, lse}, &push, groups_x,
                      shape.num_kv_heads);
    return;
  }
  const bool from_logits = args.logits.tensor != nullptr;
  const EvictionPush push{shape.slots_held,    shape.slot_stride, shape.new_slots,  shape.num_queries,
                          shape.sinks,         shape.recent_window, shape.evictions, shape.tree_span,
                          shape.tree_first,    shape.num_kv_heads,
                          from_logits ? shape.num_q_heads / shape.num_kv_heads : 1u};
  // Operands a rule never touches are absent; the positions buffer stands in for them.
  recorder.dispatch(
      {"eviction_step", 7, sizeof(EvictionPush),
       {workgroup_size(backend.device(), shape.slots_held), shape.head_dim, f16, uint32_t(shape.rule), from_logits}},
      {slice(args.k), slice(args.v), slice(args.positions), slice_or(from_logits ? args.logits : args.scores, args.positions),
       slice_or(args.score_sums, args.positions), slice_or(args.score_counts, args.positions), slice_or(args.lse, args.positions)},
      &push, shape.num_kv_heads);
}

void eviction_step_vulkan(Backend& backend, const EvictionShape& shape, const EvictionArgs& args) {
  record_eviction(backend, shape, args, nullptr);
}

}  // namespace kvc::ops
