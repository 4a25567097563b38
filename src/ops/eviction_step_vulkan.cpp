// Vulkan eviction step: one dispatch per layer, one workgroup per kv head (shaders/eviction_step.comp),
// which also forms the scores from decode logits (no decode_scores dispatch before it); a
// STREAMING decode step's single eviction takes shaders/evict_oldest.comp, a thread a slot.
#include <algorithm>

#include "ops/eviction_step.h"
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

}  // namespace

void eviction_step_vulkan(Backend& backend, const EvictionShape& shape, const EvictionArgs& args) {
  if (shape.rule == EvictionRule::Oldest && shape.evictions == 1) {  // a STREAMING decode step: no pass waits on another
    const uint32_t push[3] = {shape.slots_held, shape.slot_stride, shape.sinks};
    backend.recorder().dispatch({"evict_oldest", 3, sizeof(push), {kOldestWorkgroup, shape.head_dim, shape.dtype == Dtype::F16}},
                                {slice(args.k), slice(args.v), slice(args.positions)}, push,
                                group_count(shape.slots_held, kOldestWorkgroup), shape.num_kv_heads);
    return;
  }
  const bool from_logits = args.logits.tensor != nullptr;
  const EvictionPush push{shape.slots_held,    shape.slot_stride, shape.new_slots,  shape.num_queries,
                          shape.sinks,         shape.recent_window, shape.evictions, shape.tree_span,
                          shape.tree_first,    shape.num_kv_heads,
                          from_logits ? shape.num_q_heads / shape.num_kv_heads : 1u};
  // Operands a rule never touches are absent; the positions buffer stands in for them.
  backend.recorder().dispatch(
      {"eviction_step", 7, sizeof(EvictionPush),
       {workgroup_size(backend.device(), shape.slots_held), shape.head_dim, shape.dtype == Dtype::F16, uint32_t(shape.rule),
        from_logits}},
      {slice(args.k), slice(args.v), slice(args.positions), slice_or(from_logits ? args.logits : args.scores, args.positions),
       slice_or(args.score_sums, args.positions), slice_or(args.score_counts, args.positions), slice_or(args.lse, args.positions)},
      &push, shape.num_kv_heads);
}

}  // namespace kvc::ops
