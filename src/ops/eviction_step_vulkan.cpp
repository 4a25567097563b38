// Vulkan eviction step: one dispatch per layer, one workgroup per kv head (shaders/eviction_step.comp),
// which also forms the scores from decode logits (no decode_scores dispatch before it). A decode
// step's single eviction takes shaders/evict_one.comp, a thread a slot: STREAMING's, which may
// also be decode attention's merge, and with the merge (record_eviction's `merge`) the scored
// rules', whose scores and candidates shaders/decode_merge_scores.comp makes in the merge's
// dispatch.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ops/batch_dispatch_vulkan.h"
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
constexpr uint32_t kOneEvictionWorkgroup = 256;  // evict_one: a thread a slot

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
struct OneEvictionPush {
  uint32_t slots_held, slot_stride, sinks, num_splits, merge_groups, merge_blocks, tree_span, tree_first, entries, score_blocks;
};
struct MergeScoresPush {
  uint32_t slots_held, slot_stride, new_slots, sinks, recent_window, evictions, tree_span, tree_first, group_size,
      num_splits, merge_groups, merge_blocks, entries;
};

// decode_merge_scores: slots a thread scores (SLOTS_PER_THREAD), and the largest query-head
// group whose log-sum-exps it forms together (merge_splits.glsl's STATISTICS_HEADS).
constexpr uint32_t kScoredSlotsPerThread = 4, kScoredMaxGroup = 8;

bool scored_rule(EvictionRule rule) {
  return rule == EvictionRule::Accumulated || rule == EvictionRule::Tree || rule == EvictionRule::TreeLeft;
}

// Per kv head, candidate entries (push.entries) and the slot blocks that fill them
// (score_blocks): evicted_candidates.glsl's layout for a step of `shape`.
struct CandidateLayout {
  uint32_t entries = 0;
  uint32_t score_blocks = 0;
};
CandidateLayout candidate_layout(const EvictionShape& shape) {
  const uint32_t score_blocks = group_count(shape.slots_held, kMergeWorkgroup * kScoredSlotsPerThread);
  return {std::max(score_blocks, 2u), score_blocks};
}

// evict_one's binding arrays (K, V, positions, S, C, candidates: per layer) and its other
// bindings (the merge's partials, output and lse).
constexpr uint32_t kOneEvictionArrays = 6, kOneEvictionSingles = 3;

// Single evictions of `layers` (evict_one, a thread a slot; layers alike in kernel and push
// constants share a dispatch, one layer each in the grid's z): STREAMING's, with `merge` (one
// layer) in the merge's dispatch, or a scored rule's from the candidates its scoring left.
void record_one_evictions(Backend& backend, const std::vector<DeferredEviction>& layers, const MergeBindings* merge) {
  const EvictionShape& shape = layers.front().shape;
  const bool scored = shape.rule != EvictionRule::Oldest;
  const uint32_t workgroup = merge ? kMergeWorkgroup : kOneEvictionWorkgroup;  // a merge's workgroup is the merge's size
  const uint32_t merge_blocks = merge_dim_blocks(shape.head_dim);
  // Per kv head (the grid's y): its query heads' merge workgroups, then its slot blocks.
  const uint32_t merge_groups = merge ? shape.num_q_heads / shape.num_kv_heads * merge_blocks : 0;
  const uint32_t groups_x = group_count(uint64_t(merge_groups) * workgroup + shape.slots_held, workgroup);
  const CandidateLayout candidates = scored ? candidate_layout(shape) : CandidateLayout{};
  const OneEvictionPush push{shape.slots_held, shape.slot_stride, shape.sinks, merge ? merge->num_splits : 0u, merge_groups,
                             merge_blocks, shape.tree_span, shape.tree_first, candidates.entries, candidates.score_blocks};
  // Layers a dispatch binds: the binding arrays' length, fixed per device so that the kernel
  // has one pipeline whatever a step holds.
  const uint32_t per_dispatch = merge ? 0 : batch_caches_per_dispatch(backend, kOneEvictionArrays, kOneEvictionSingles);
  const uint32_t length = std::max(per_dispatch, 1u);
  std::vector<size_t> members(layers.size());
  for (size_t index = 0; index < layers.size(); ++index) members[index] = index;
  for (const std::vector<size_t>& group : dispatch_groups(members, per_dispatch)) {
    // Operands a rule never touches are absent; the positions buffer stands in for them.
    const auto stand_in = [](const DeferredEviction& layer) { return slice(layer.args.positions); };
    std::vector<vk::BufferSlice> buffers = binding_arrays<DeferredEviction>(
        layers, group, length,
        {[](const DeferredEviction& layer) { return slice(layer.args.k); },
         [](const DeferredEviction& layer) { return slice(layer.args.v); },
         [](const DeferredEviction& layer) { return slice(layer.args.positions); }});
    const vk::BufferSlice merge_stand_in = stand_in(layers[group.front()]);
    buffers.insert(buffers.end(), {merge ? slice(merge->partials) : merge_stand_in, merge ? slice(merge->out) : merge_stand_in,
                                   merge ? slice(merge->lse) : merge_stand_in});
    const std::vector<vk::BufferSlice> tail = binding_arrays<DeferredEviction>(
        layers, group, length,
        {[](const DeferredEviction& layer) { return slice_or(layer.args.score_sums, layer.args.positions); },
         [](const DeferredEviction& layer) { return slice_or(layer.args.score_counts, layer.args.positions); },
         [](const DeferredEviction& layer) { return slice_or(layer.candidates, layer.args.positions); }});
    buffers.insert(buffers.end(), tail.begin(), tail.end());
    backend.recorder().dispatch({"evict_one",
                                 9,
                                 sizeof(push),
                                 {workgroup, shape.head_dim, shape.dtype == Dtype::F16, merge != nullptr, uint32_t(shape.rule), length},
                                 {length, length, length, 1, 1, 1, length, length, length}},
                                buffers, &push, groups_x, shape.num_kv_heads, static_cast<uint32_t>(group.size()));
  }
}

}  // namespace

bool scores_in_merge(const EvictionShape& shape, const EvictionArgs& args) {
  return scored_rule(shape.rule) && shape.evictions <= 1 && shape.num_queries == 1 && args.logits &&
         shape.num_q_heads / shape.num_kv_heads <= kScoredMaxGroup;
}

bool eviction_merges(const EvictionShape& shape, const EvictionArgs& args) {
  if (shape.rule == EvictionRule::Oldest) return shape.evictions == 1;
  if (!scores_in_merge(shape, args)) return false;
  // KVC_SCORED_EVICTION=blocks or =workgroup picks the route wherever both can take the step
  // (read per call, so that the tests run both at any size); by default, up to
  // kMaxWorkgroup * kSlotsPerThread slots eviction_step's one workgroup per kv head makes the
  // step in a single round of loads, and its own dispatch costs less than choosing from the
  // blocks' candidates (H100: H2O 762 against 834 us, 32 layers at c = 1024); past that its walk
  // grows with the slots (docs/benchmarks.md). A step that defers its eviction
  // (decode_evict_deferring) takes the blocks at any size.
  const char* route = std::getenv("KVC_SCORED_EVICTION");
  if (route && std::strcmp(route, "blocks") == 0) return true;
  if (route && std::strcmp(route, "workgroup") == 0) return false;
  return shape.slots_held > kMaxWorkgroup * kSlotsPerThread;
}

size_t eviction_candidates_bytes(const EvictionShape& shape) {
  return size_t(shape.num_kv_heads) * candidate_layout(shape).entries * 3 * sizeof(uint32_t);
}

void record_merge_scores(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings& merge,
                         View candidates) {
  const uint32_t workgroup = kMergeWorkgroup;  // the merge's, so its statistics are the merge's bit for bit
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads, merge_blocks = merge_dim_blocks(shape.head_dim);
  const uint32_t merge_groups = group * merge_blocks;
  const CandidateLayout layout = candidate_layout(shape);
  const MergeScoresPush push{shape.slots_held, shape.slot_stride, shape.new_slots, shape.sinks,   shape.recent_window,
                             shape.evictions,  shape.tree_span,   shape.tree_first, group,        merge.num_splits,
                             merge_groups,     merge_blocks,      layout.entries};
  backend.recorder().dispatch(
      {"decode_merge_scores", 8, sizeof(push),
       {workgroup, shape.head_dim, shape.dtype == Dtype::F16, uint32_t(shape.rule), kScoredSlotsPerThread}},
      {slice(args.positions), slice(args.logits), slice(args.score_sums), slice_or(args.score_counts, args.positions),
       slice(merge.partials), slice(merge.out), slice(merge.lse), slice(candidates)},
      &push, merge_groups + layout.score_blocks, shape.num_kv_heads);
}

void record_deferred_evictions(Backend& backend, const std::vector<DeferredEviction>& evictions) {
  // Layers alike in kernel and push constants (in an engine's step, all of them) share dispatches.
  std::vector<bool> taken(evictions.size(), false);
  for (size_t first = 0; first < evictions.size(); ++first) {
    if (taken[first]) continue;
    std::vector<DeferredEviction> alike;
    for (size_t index = first; index < evictions.size(); ++index) {
      const EvictionShape &a = evictions[first].shape, &b = evictions[index].shape;
      const bool same_dispatch = a.rule == b.rule && a.head_dim == b.head_dim && a.dtype == b.dtype &&
                                 a.num_kv_heads == b.num_kv_heads && a.slots_held == b.slots_held &&
                                 a.slot_stride == b.slot_stride && a.sinks == b.sinks && a.tree_span == b.tree_span &&
                                 a.tree_first == b.tree_first;
      if (taken[index] || !same_dispatch) continue;
      taken[index] = true;
      alike.push_back(evictions[index]);
    }
    record_one_evictions(backend, alike, nullptr);
  }
}

void record_eviction(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings* merge) {
  require(!merge || eviction_merges(shape, args), KVC_ERROR_INTERNAL, "an eviction step that cannot merge given a merge");
  if (merge && shape.rule != EvictionRule::Oldest) {
    const View candidates = view(backend.scratch(ScratchId::EvictionCandidates, eviction_candidates_bytes(shape)));
    record_merge_scores(backend, shape, args, *merge, candidates);
    if (shape.evictions == 1) record_one_evictions(backend, {{shape, args, candidates}}, nullptr);
    return;
  }
  if (shape.rule == EvictionRule::Oldest && shape.evictions == 1) {  // a STREAMING decode step: no pass waits on another
    record_one_evictions(backend, {{shape, args, View{}}}, merge);
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
       {workgroup_size(backend.device(), shape.slots_held), shape.head_dim, shape.dtype == Dtype::F16, uint32_t(shape.rule), from_logits}},
      {slice(args.k), slice(args.v), slice(args.positions), slice_or(from_logits ? args.logits : args.scores, args.positions),
       slice_or(args.score_sums, args.positions), slice_or(args.score_counts, args.positions), slice_or(args.lse, args.positions)},
      &push, shape.num_kv_heads);
}

void eviction_step_vulkan(Backend& backend, const EvictionShape& shape, const EvictionArgs& args) {
  record_eviction(backend, shape, args, nullptr);
}

}  // namespace kvc::ops
