// One eviction of a decode step (ops/eviction_step.h), as eviction_step.comp makes it: the
// victim's rank leaves, every rank above it drops by one, and the last slot's token (rank, S,
// C and K, V rows) moves into the freed slot. No part waits for another here, so a thread takes
// a few slots and the slots spread over many workgroups, where eviction_step's one workgroup per
// kv head walks them in passes between barriers. The victim: under STREAMING's rule (Oldest)
// rank `sinks`, whose thread finds it; under the scored rules the one the step's scoring
// (eviction_scores.comp) left candidates for, which every workgroup chooses from them itself
// (a few entries per kv head). The freed slot's thread alone touches the last slot's entries: it
// lowers the rank (the vacated entry too, as the reference does) and moves it with S and C; its
// workgroup then moves the rows, a word a thread (one thread's loop of loads and stores to one
// buffer waited for memory at every word: 40 us).
// With MERGE (Oldest only) the dispatch is also decode attention's merge (ops/decode_evict.h):
// its first workgroups merge the splits, one (query head, dim block) each, the rest evict;
// neither reads what the other writes, so the eviction costs no dispatch and no barrier of its own.
// Without it one dispatch may evict in LAYERS layers at once (the grid's z, KVC_LAYER; each
// layer's buffers an element of the binding arrays): a step's decode evictions, left for its
// end (ops/decode_evict.h), cost one dispatch's latency where a dispatch a layer cost about 3 us
// each (docs/benchmarks.md). The includer defines KVC_LAYER (evict_one.comp, evict_one_layers.comp).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const bool MERGE = false;
layout(constant_id = 4) const uint RULE = 0;  // ops::EvictionRule: Oldest, Accumulated, CurrentQuery, Tree or TreeLeft
layout(constant_id = 5) const uint LAYERS = 1;  // the binding arrays' length; 1 with MERGE

const uint RULE_OLDEST = 0, RULE_TREE = 3, RULE_TREE_LEFT = 4;
const bool KEEPS_SUMS = RULE != RULE_OLDEST;
const bool KEEPS_COUNTS = RULE == RULE_TREE || RULE == RULE_TREE_LEFT;

// Bindings 0-2 and 6-8 are per layer, arrays of LAYERS indexed by the workgroup's layer;
// 3-5 are the merge's (MERGE only).
layout(binding = 0) buffer Keys { uint words[]; } keys_of[LAYERS];       // [num_kv_heads][slot_stride][HEAD_DIM]
layout(binding = 1) buffer Values { uint words[]; } values_of[LAYERS];
layout(binding = 2) buffer Positions { int ranks[]; } ranks_of[LAYERS];  // [num_kv_heads][slot_stride]
layout(binding = 3) readonly buffer Partials { float partials[]; };      // attention_decode's
layout(binding = 4) writeonly buffer Out { uint out_words[]; };          // [num_q_heads][HEAD_DIM]
layout(binding = 5) writeonly buffer Lse { float lse[]; };               // [num_q_heads]
layout(binding = 6) buffer Sums { float words[]; } sums_of[LAYERS];      // KEEPS_SUMS: [num_kv_heads][slot_stride]
layout(binding = 7) buffer Counts { uint words[]; } counts_of[LAYERS];   // KEEPS_COUNTS
layout(binding = 8) readonly buffer Candidates { uint words[]; } candidates_of[LAYERS];  // KEEPS_SUMS: evicted_candidates.glsl

layout(push_constant) uniform Push {
  uint slots_held;  // before the eviction
  uint slot_stride;
  uint sinks;         // Oldest: the victim's rank
  uint num_splits;    // MERGE: partial rows per query head
  uint merge_groups;  // MERGE: the merge's workgroups per kv head (its query heads x merge_blocks), first in x
  uint merge_blocks;  // MERGE: dim blocks per query head
  uint tree_span;     // the tree rules: the scope's left rank is sinks + tree_first % tree_span
  uint tree_first;
  uint entries;       // KEEPS_SUMS: candidate entries per kv head
  uint score_blocks;  // the lowest-score rules: the entries that hold candidates
} push;

// The workgroup's layer: KVC_LAYER, which the kernel's file defines (the constant 0 where a
// dispatch takes one layer, so that a device need not index buffer arrays dynamically).
#define k_words keys_of[KVC_LAYER].words
#define v_words values_of[KVC_LAYER].words
#define positions ranks_of[KVC_LAYER].ranks
#define sums sums_of[KVC_LAYER].words
#define counts counts_of[KVC_LAYER].words
#define candidates candidates_of[KVC_LAYER].words

const uint WG = gl_WorkGroupSize.x;
const bool OUT_F16 = KV_F16;
#define KVC_MERGE_OUT_WORDS out_words
#include "merge_splits.glsl"
#include "eviction_choice.glsl"
#include "evicted_candidates.glsl"

const uint ROW_WORDS = KV_F16 ? HEAD_DIM / 2 : HEAD_DIM;

shared uint freed_s;  // Oldest: the victim's slot, if this workgroup holds it

// The scored rules' victim of kv head `kv_head`: its rank (x) and slot (y; NONE where the
// scoring found no candidate, S not being a number), in every thread.
uvec2 chosen_victim(uint kv_head) {
  if (KEEPS_COUNTS) {
    const uint at = entry_at(kv_head, 0), left = push.sinks + push.tree_first % push.tree_span;
    const uint leaving = RULE == RULE_TREE_LEFT ? 0u
                         : tree_leaving(uintBitsToFloat(candidates[at]), candidates[at + 1],
                                        uintBitsToFloat(candidates[at + ENTRY_WORDS]), candidates[at + ENTRY_WORDS + 1]);
    return uvec2(left + leaving, candidates[at + leaving * ENTRY_WORDS + 2]);
  }
  Lowest lowest = no_candidate();
  for (uint block = gl_LocalInvocationID.x; block < push.score_blocks; block += WG) {
    const uint at = entry_at(kv_head, block);
    const float score = uintBitsToFloat(candidates[at]);
    if (before(score, candidates[at + 1], lowest.score, lowest.rank)) lowest = Lowest(score, candidates[at + 1], candidates[at + 2]);
  }
  lowest = reduce_lowest(lowest, false);
  return uvec2(lowest.rank, lowest.slot);
}

// Slots a thread takes (ops' kEvictedSlotsPerThread), their ranks' loads in flight together: a
// fixed bound, since it sizes a register array.
const uint SLOTS_PER_THREAD = 4;
const uint BLOCK_SLOTS = WG * SLOTS_PER_THREAD;

// Slot block `block` (BLOCK_SLOTS slots) of kv head `kv_head`.
void evict(uint block, uint kv_head) {
  const uint t = gl_LocalInvocationID.x, last = push.slots_held - 1, base = kv_head * push.slot_stride;
  // The slots' ranks are loaded first: they do not depend on the victim, which takes the
  // candidates' loads and a barrier.
  uint ranks[SLOTS_PER_THREAD];
  [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i) {
    const uint slot = block * BLOCK_SLOTS + i * WG + t;
    ranks[i] = slot < last ? uint(positions[base + slot]) : 0u;
  }
  uint victim = push.sinks, freed = NONE;
  if (KEEPS_SUMS) {
    const uvec2 chosen = chosen_victim(kv_head);
    victim = chosen.x, freed = chosen.y;
    if (freed == NONE) return;
  } else {
    if (t == 0) freed_s = NONE;
    barrier();
  }
  [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i) {
    const uint slot = block * BLOCK_SLOTS + i * WG + t, rank = ranks[i];
    if (slot >= last) continue;  // the last slot's entries are the freed slot's thread's
    if (KEEPS_SUMS ? slot == freed : rank == victim) {
      const int moved = positions[base + last], lowered = uint(moved) > victim ? moved - 1 : moved;
      positions[base + last] = lowered;
      positions[base + slot] = lowered;
      if (KEEPS_SUMS) sums[base + slot] = sums[base + last];
      if (KEEPS_COUNTS) counts[base + slot] = counts[base + last];
      if (!KEEPS_SUMS) freed_s = slot;
    } else if (rank > victim) {
      positions[base + slot] = int(rank) - 1;
    }
  }
  if (!KEEPS_SUMS) {
    barrier();
    freed = freed_s;
  }
  if (freed == NONE || freed == last || freed / BLOCK_SLOTS != block) return;
  const uint to_row = (base + freed) * ROW_WORDS, from_row = (base + last) * ROW_WORDS;
  for (uint w = t; w < ROW_WORDS; w += WG) {
    k_words[to_row + w] = k_words[from_row + w];
    v_words[to_row + w] = v_words[from_row + w];
  }
}

// Workgroup (x, kv head, layer): without MERGE x is the slot block; with it the first
// merge_groups merge the kv head's query heads, the rest take its slot blocks.
void main() {
  const uint x = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y;
  if (!MERGE) {
    evict(x, kv_head);
    return;
  }
  if (x < push.merge_groups) {
    const uint head = kv_head * (push.merge_groups / push.merge_blocks) + x / push.merge_blocks;
    merge_splits(head * push.num_splits, push.num_splits, head, head, x % push.merge_blocks, push.merge_blocks);
    return;
  }
  evict(x - push.merge_groups, kv_head);
}
