#version 450
// Decode attention's merge and the first half of a decode step's eviction under a rule that
// reads the step's attention (H2O's Accumulated, TreeKV's Tree and TreeLeft; ops/eviction_step.h:
// at most one eviction, the scores formed from the decode's logits), in one dispatch
// (ops/decode_evict.h). The first merge_groups workgroups of each kv head merge its query heads'
// splits; the rest score its slots, a block of WG * SLOTS_PER_THREAD slots each: a block forms
// the group's log-sum-exps from the splits itself (split_statistics, bit for bit what the merge
// writes), updates its slots' S (and C) as eviction_step.comp does (the same expressions, in the
// same order) and leaves its candidates for the victim: its lowest (score, rank, slot), or the
// tree scope's entries it holds. evict_one.comp then chooses the victim from them and evicts,
// a slot a thread. Neither the merge nor the scoring reads what the other writes.
// (A design that also evicted in this dispatch, the last of a kv head's blocks to finish
// choosing and evicting, measured slower than the dispatch that follows: docs/benchmarks.md.)
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;  // the cache's dtype
layout(constant_id = 3) const uint RULE = 1;  // ops::EvictionRule: Accumulated, Tree or TreeLeft
layout(constant_id = 4) const uint SLOTS_PER_THREAD = 4;

const uint RULE_TREE = 3, RULE_TREE_LEFT = 4;
const bool KEEPS_COUNTS = RULE == RULE_TREE || RULE == RULE_TREE_LEFT;

layout(binding = 0) readonly buffer Positions { int positions[]; };  // ranks, [num_kv_heads][slot_stride]
layout(binding = 1) readonly buffer Logits { float logits[]; };      // [num_q_heads][slots_held]
layout(binding = 2) buffer Sums { float sums[]; };                   // [num_kv_heads][slot_stride]
layout(binding = 3) buffer Counts { uint counts[]; };                // tree rules only
layout(binding = 4) readonly buffer Partials { float partials[]; };  // attention_decode's
layout(binding = 5) writeonly buffer Out { uint out_words[]; };      // [num_q_heads][HEAD_DIM]
layout(binding = 6) writeonly buffer Lse { float lse[]; };           // [num_q_heads]
layout(binding = 7) writeonly buffer Candidates { uint candidates[]; };  // [num_kv_heads][entries][3]

layout(push_constant) uniform Push {
  uint slots_held;  // before the eviction
  uint slot_stride;
  uint new_slots;
  uint sinks;
  uint recent_window;
  uint evictions;  // 0 or 1
  uint tree_span;
  uint tree_first;
  uint group_size;    // query heads per kv head, <= STATISTICS_HEADS
  uint num_splits;    // partial rows per query head
  uint merge_groups;  // the merge's workgroups per kv head (its query heads x merge_blocks), first in x
  uint merge_blocks;  // dim blocks per query head
  uint entries;       // candidate entries per kv head: max(slot blocks, 2)
} push;

const uint WG = gl_WorkGroupSize.x;
#define KVC_MERGE_OUT_WORDS out_words
#define KVC_STATISTICS_HEADS 8  // ops' kScoredMaxGroup
#include "merge_splits.glsl"
#include "eviction_choice.glsl"
#include "evicted_candidates.glsl"

void write_candidate(uint kv_head, uint entry, uint key, uint second, uint slot) {
  const uint at = entry_at(kv_head, entry);
  candidates[at] = key;
  candidates[at + 1] = second;
  candidates[at + 2] = slot;
}

// Slot block `block` of kv head `kv_head`: its slots' S (and C) and its candidates.
void score(uint block, uint kv_head) {
  const uint t = gl_LocalInvocationID.x, held = push.slots_held;
  const uint base = kv_head * push.slot_stride;
  // The slots' entries, in flight while the log-sum-exps are formed.
  const uint block_first = block * WG * SLOTS_PER_THREAD;
  int ranks[SLOTS_PER_THREAD];
  float sums_before[SLOTS_PER_THREAD], step[SLOTS_PER_THREAD];
  uint counts_before[SLOTS_PER_THREAD];
  [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i) {
    const uint slot = min(block_first + t + i * WG, held - 1u);  // past the end: a repeat, not stored
    ranks[i] = positions[base + slot];
    sums_before[i] = sums[base + slot];
    counts_before[i] = KEEPS_COUNTS ? counts[base + slot] : 0u;
    step[i] = 0.0;
  }
  vec2 statistics[STATISTICS_HEADS];
  split_statistics(kv_head * push.group_size * push.num_splits, push.num_splits, push.group_size, statistics);
  [[unroll]] for (uint g = 0; g < STATISTICS_HEADS; ++g) {
    if (g < push.group_size) {
      const uint row = (kv_head * push.group_size + g) * held;
      precise const float head_lse = statistics[g].x + log(statistics[g].y);  // as the merge writes it
      [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i)
        step[i] += exp(logits[row + min(block_first + t + i * WG, held - 1u)] - head_lse);
    }
  }

  const bool evicting = push.evictions > 0;
  const uint first = push.sinks, end = evicting ? held - push.recent_window : 0u;
  const uint left = KEEPS_COUNTS && evicting ? first + push.tree_first % push.tree_span : 0u;
  Lowest lowest = no_candidate();
  [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i) {
    const uint slot = block_first + t + i * WG;
    if (slot >= held) continue;
    const uint rank = uint(ranks[i]);
    const bool fresh = slot + push.new_slots >= held;
    const float sum = (fresh ? 0.0 : sums_before[i]) + step[i];
    sums[base + slot] = sum;
    if (KEEPS_COUNTS) {
      // The step's one query is the newest rank; it sees every rank.
      const uint count = (fresh ? 0u : counts_before[i]) + held - max(rank, held - 1u);
      counts[base + slot] = count;
      if (evicting && in_scope(rank, left)) write_candidate(kv_head, rank - left, floatBitsToUint(sum), count, slot);
    } else {
      note_candidate(sum, rank, slot, first, end, lowest);
    }
  }
  if (!evicting || KEEPS_COUNTS) return;
  lowest = reduce_lowest(lowest, false);
  if (gl_LocalInvocationID.x == 0) write_candidate(kv_head, block, floatBitsToUint(lowest.score), lowest.rank, lowest.slot);
}

// Workgroup (x, kv head): the first merge_groups merge the kv head's query heads, the rest
// score its slot blocks.
void main() {
  const uint x = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y;
  if (x < push.merge_groups) {
    const uint head = kv_head * push.group_size + x / push.merge_blocks;
    merge_splits(head * push.num_splits, push.num_splits, head, head, x % push.merge_blocks, push.merge_blocks);
    return;
  }
  score(x - push.merge_groups, kv_head);
}
