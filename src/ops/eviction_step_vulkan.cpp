// Vulkan eviction step: one dispatch per layer, one workgroup per kv head (shaders/eviction_step.comp),
// which also forms the scores from decode logits (no decode_scores dispatch before it). A decode
// step's single eviction under STREAMING's rule takes shaders/evict_one.comp, a thread a few slots,
// which may also be decode attention's merge. A decode step under a rule that reads its
// attention, scored from the decode's logits, takes eviction_scores (the scores and the
// victim's candidates, over many workgroups) and evict_one, in their _layers forms over many
// layers at once where a step left them (ops/decode_evict.h).
#include <algorithm>
#include <functional>

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
// evict_one: its workgroup, and the slots each thread takes (the shader's fixed SLOTS_PER_THREAD).
constexpr uint32_t kOneEvictionWorkgroup = 256, kEvictedSlotsPerThread = 4;
// eviction_scores: the slots each thread scores (the shader's fixed SLOTS_PER_THREAD), and its
// workgroup: 128 threads, a block of 512 slots whose candidates take one entry. Under TOVA's rule
// a slot's score sums every kv head's probability, so one workgroup takes a block for all kv
// heads, which then take the score in turn: 32 threads there (blocks of 128 slots), so that the
// grid is not a few workgroups a layer (128 threads took about 1% longer a decode step on the
// H200, docs/benchmarks.md), unless the blocks would pass a dispatch's 65535.
constexpr uint32_t kScoredSlotsPerThread = 4;
uint32_t scores_workgroup(EvictionRule rule, uint32_t slots) {
  const uint32_t narrow = 32, wide = 128;
  const bool narrow_fits = (uint64_t(slots) + narrow * kScoredSlotsPerThread - 1) / (narrow * kScoredSlotsPerThread) <= 65535u;
  return rule == EvictionRule::CurrentQuery && narrow_fits ? narrow : wide;
}

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
struct ScoresPush {
  uint32_t slots_held, slot_stride, new_slots, sinks, recent_window, evictions, tree_span, tree_first, entries;
};

// Per kv head, candidate entries (push.entries) and the slot blocks that fill them
// (score_blocks): evicted_candidates.glsl's layout for a step over `slots` slots.
struct CandidateLayout {
  uint32_t entries = 0;
  uint32_t score_blocks = 0;
};
CandidateLayout candidate_layout(EvictionRule rule, uint32_t slots) {
  const uint32_t score_blocks = group_count(slots, scores_workgroup(rule, slots) * kScoredSlotsPerThread);
  return {std::max(score_blocks, 2u), score_blocks};
}

// The kernels' binding arrays (per layer) and other bindings: evict_one's K, V, positions, S,
// C and candidates, beside the merge's partials, output and lse; eviction_scores' positions,
// logits, lse, S, C and candidates.
constexpr uint32_t kOneEvictionArrays = 6, kOneEvictionSingles = 3, kScoresArrays = 6;

// `members` of `layers` in dispatches: layers alike (`alike`: the same kernel and push
// constants) together, in order of their first member, at most `per_dispatch` a dispatch (one
// where it is 0).
std::vector<std::vector<size_t>> layer_dispatches(const std::vector<DeferredEviction>& layers, const std::vector<size_t>& members,
                                                  uint32_t per_dispatch,
                                                  const std::function<bool(const EvictionShape&, const EvictionShape&)>& alike) {
  std::vector<std::vector<size_t>> dispatches;
  std::vector<bool> taken(members.size(), false);
  for (size_t first = 0; first < members.size(); ++first) {
    if (taken[first]) continue;
    std::vector<size_t> kind;
    for (size_t other = first; other < members.size(); ++other) {
      if (taken[other] || !alike(layers[members[first]].shape, layers[members[other]].shape)) continue;
      taken[other] = true;
      kind.push_back(members[other]);
    }
    for (std::vector<size_t>& group : dispatch_groups(kind, per_dispatch)) dispatches.push_back(std::move(group));
  }
  return dispatches;
}

// The binding arrays' length of a dispatch of `group`: one for a single layer (the kernels'
// single-layer form, whose arrays need no dynamic indexing and bind few descriptors), else
// `per_dispatch`, fixed per device so that the many-layer form has one pipeline.
uint32_t binding_array_length(const std::vector<size_t>& group, uint32_t per_dispatch) {
  return group.size() > 1 ? per_dispatch : 1u;
}

// Single evictions of `members` of `layers` (evict_one, a thread a few slots; one layer each in the
// grid's z): STREAMING's, with `merge` (one layer) in the merge's dispatch, or a scored rule's
// from the candidates eviction_scores left.
void record_one_evictions(Backend& backend, const std::vector<DeferredEviction>& layers, const std::vector<size_t>& members,
                          const MergeBindings* merge) {
  const uint32_t per_dispatch = merge ? 0 : batch_caches_per_dispatch(backend, kOneEvictionArrays, kOneEvictionSingles);
  const auto alike = [](const EvictionShape& a, const EvictionShape& b) {
    return a.rule == b.rule && a.head_dim == b.head_dim && a.dtype == b.dtype && a.num_kv_heads == b.num_kv_heads &&
           a.slots_held == b.slots_held && a.slot_stride == b.slot_stride && a.sinks == b.sinks && a.tree_span == b.tree_span &&
           a.tree_first == b.tree_first;
  };
  for (const std::vector<size_t>& group : layer_dispatches(layers, members, per_dispatch, alike)) {
    const uint32_t length = binding_array_length(group, per_dispatch);
    const EvictionShape& shape = layers[group.front()].shape;
    const uint32_t workgroup = merge ? kMergeWorkgroup : kOneEvictionWorkgroup;  // a merge's workgroup is the merge's size
    const uint32_t merge_blocks = merge_dim_blocks(shape.head_dim);
    // Per kv head (the grid's y): its query heads' merge workgroups, then its slot blocks.
    const uint32_t merge_groups = merge ? shape.num_q_heads / shape.num_kv_heads * merge_blocks : 0;
    const uint32_t block_slots = workgroup * kEvictedSlotsPerThread;
    const uint32_t groups_x = group_count(uint64_t(merge_groups) * block_slots + shape.slots_held, block_slots);
    const CandidateLayout candidates = shape.rule != EvictionRule::Oldest ? candidate_layout(shape.rule, shape.slots_held) : CandidateLayout{};
    const OneEvictionPush push{shape.slots_held, shape.slot_stride, shape.sinks, merge ? merge->num_splits : 0u, merge_groups,
                               merge_blocks, shape.tree_span, shape.tree_first, candidates.entries, candidates.score_blocks};
    // Operands a rule never touches are absent; the positions buffer stands in for them.
    std::vector<vk::BufferSlice> buffers = binding_arrays<DeferredEviction>(
        layers, group, length,
        {[](const DeferredEviction& layer) { return slice(layer.args.k); },
         [](const DeferredEviction& layer) { return slice(layer.args.v); },
         [](const DeferredEviction& layer) { return slice(layer.args.positions); }});
    const vk::BufferSlice stand_in = slice(layers[group.front()].args.positions);
    buffers.insert(buffers.end(), {merge ? slice(merge->partials) : stand_in, merge ? slice(merge->out) : stand_in,
                                   merge ? slice(merge->lse) : stand_in});
    const std::vector<vk::BufferSlice> kept = binding_arrays<DeferredEviction>(
        layers, group, length,
        {[](const DeferredEviction& layer) { return slice_or(layer.args.score_sums, layer.args.positions); },
         [](const DeferredEviction& layer) { return slice_or(layer.args.score_counts, layer.args.positions); },
         [](const DeferredEviction& layer) { return slice_or(layer.candidates, layer.args.positions); }});
    buffers.insert(buffers.end(), kept.begin(), kept.end());
    backend.recorder().dispatch(
        {length > 1 ? "evict_one_layers" : "evict_one", 9, sizeof(push),
         {workgroup, shape.head_dim, shape.dtype == Dtype::F16, merge != nullptr, uint32_t(shape.rule), length},
         {length, length, length, 1, 1, 1, length, length, length}},
        buffers, &push, groups_x, shape.num_kv_heads, static_cast<uint32_t>(group.size()));
  }
}

// The scores and candidates of every layer's step (eviction_scores).
void record_scores(Backend& backend, const std::vector<DeferredEviction>& layers) {
  const uint32_t per_dispatch = batch_caches_per_dispatch(backend, kScoresArrays, 0);
  const auto alike = [](const EvictionShape& a, const EvictionShape& b) {
    return a.rule == b.rule && a.num_kv_heads == b.num_kv_heads && a.num_q_heads == b.num_q_heads &&
           a.slots_held == b.slots_held && a.slot_stride == b.slot_stride && a.new_slots == b.new_slots && a.sinks == b.sinks &&
           a.recent_window == b.recent_window && a.evictions == b.evictions && a.tree_span == b.tree_span &&
           a.tree_first == b.tree_first;
  };
  std::vector<size_t> members(layers.size());
  for (size_t index = 0; index < layers.size(); ++index) members[index] = index;
  for (const std::vector<size_t>& group : layer_dispatches(layers, members, per_dispatch, alike)) {
    const uint32_t length = binding_array_length(group, per_dispatch);
    const EvictionShape& shape = layers[group.front()].shape;
    const CandidateLayout candidates = candidate_layout(shape.rule, shape.slots_held);
    const ScoresPush push{shape.slots_held,     shape.slot_stride, shape.new_slots,  shape.sinks,      shape.recent_window,
                          shape.evictions,      shape.tree_span,   shape.tree_first, candidates.entries};
    // TOVA's score of a slot sums every kv head's probability, the other rules' their own.
    const bool every_kv_head = shape.rule == EvictionRule::CurrentQuery;
    const std::vector<vk::BufferSlice> buffers = binding_arrays<DeferredEviction>(
        layers, group, length,
        {[](const DeferredEviction& layer) { return slice(layer.args.positions); },
         [](const DeferredEviction& layer) { return slice(layer.args.logits); },
         [](const DeferredEviction& layer) { return slice(layer.args.lse); },
         [](const DeferredEviction& layer) { return slice(layer.args.score_sums); },
         [](const DeferredEviction& layer) { return slice_or(layer.args.score_counts, layer.args.positions); },
         [](const DeferredEviction& layer) { return slice(layer.candidates); }});
    backend.recorder().dispatch({length > 1 ? "eviction_scores_layers" : "eviction_scores", 6, sizeof(push),
                                 {scores_workgroup(shape.rule, shape.slots_held), uint32_t(shape.rule), length, shape.num_q_heads / shape.num_kv_heads,
                                  every_kv_head ? shape.num_kv_heads : 1u},
                                 {length, length, length, length, length, length}},
                                buffers, &push, candidates.score_blocks,
                                every_kv_head ? 1u : shape.num_kv_heads,  // TOVA's: kv heads in turn
                                static_cast<uint32_t>(group.size()));
  }
}

}  // namespace

bool scored_from_logits(const EvictionShape& shape, const EvictionArgs& args) {
  return rule_keeps_sums(shape.rule) && shape.num_queries == 1 && shape.evictions <= 1 && args.logits && args.lse;
}

size_t deferred_candidates_bytes(EvictionRule rule, uint32_t num_kv_heads, uint32_t slots) {
  return size_t(num_kv_heads) * candidate_layout(rule, slots).entries * 3 * sizeof(uint32_t);
}

void record_scored_evictions(Backend& backend, const std::vector<DeferredEviction>& evictions) {
  for (const DeferredEviction& eviction : evictions)
    require(scored_from_logits(eviction.shape, eviction.args) && eviction.candidates, KVC_ERROR_INTERNAL,
            "a scored eviction without logits or candidates");
  if (evictions.empty()) return;
  record_scores(backend, evictions);
  std::vector<size_t> evicting;
  for (size_t index = 0; index < evictions.size(); ++index)
    if (evictions[index].shape.evictions == 1) evicting.push_back(index);
  if (!evicting.empty()) record_one_evictions(backend, evictions, evicting, nullptr);
}

void record_eviction(Backend& backend, const EvictionShape& shape, const EvictionArgs& args, const MergeBindings* merge) {
  const bool streaming_decode = shape.rule == EvictionRule::Oldest && shape.evictions == 1;
  require(!merge || streaming_decode, KVC_ERROR_INTERNAL, "an eviction step that cannot merge given a merge");
  if (streaming_decode) {  // no pass waits on another
    record_one_evictions(backend, {{shape, args, View{}}}, {0}, merge);
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
