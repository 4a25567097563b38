#version 450
// One decode-time eviction step (see src/ops/eviction_step.h): one workgroup per kv head
// updates its slots' scores, then for each eviction picks the victim rank by RULE, lowers the
// ranks above it and moves the last physical slot's token into the freed slot. Every pass is
// a strided loop over the slots (thread t always takes slots t, t + WG, ...), so any cache
// size fits one workgroup. The step is latency-bound (one workgroup per kv head, a few
// microseconds per layer on the H100, docs/benchmarks.md): what it saves is barriers. The
// victim's physical slot is found with the victim (the lowest-score reduction carries it, the
// score pass records the tree scope's), so lowering the ranks and moving the last slot's token
// share one pass; only STREAMING's chunks of several tokens (a single eviction takes
// evict_one.comp) and a later eviction of a chunk's TreeLeft still look the slot up first.
// A decode step of H2O, TOVA or TreeKV scored from the decode's logits takes
// eviction_scores.comp and evict_one.comp instead (ops/decode_evict.h); this kernel takes
// chunks' steps and the steps given probabilities.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint RULE = 0;  // ops::EvictionRule
// Scores binds attention's decode logits [num_kv_heads][slots_held][group_size] and Lse their log-sum-exps:
// the probabilities are formed here, as decode_scores would (same expression, same order).
layout(constant_id = 4) const bool SCORES_FROM_LOGITS = false;

const uint RULE_OLDEST = 0, RULE_ACCUMULATED = 1, RULE_CURRENT_QUERY = 2, RULE_TREE = 3, RULE_TREE_LEFT = 4;
const bool KEEPS_SUMS = RULE != RULE_OLDEST;
const bool KEEPS_COUNTS = RULE == RULE_TREE || RULE == RULE_TREE_LEFT;

// Threads read what other threads of the workgroup wrote after a barrier: coherent.
layout(binding = 0) coherent buffer Keys { uint k_words[]; };
layout(binding = 1) coherent buffer Values { uint v_words[]; };
layout(binding = 2) coherent buffer Positions { int positions[]; };  // ranks
layout(binding = 3) readonly buffer Scores { float scores[]; };      // [num_kv_heads][slots_held], or logits
layout(binding = 4) coherent buffer Sums { float sums[]; };
layout(binding = 5) coherent buffer Counts { uint counts[]; };
layout(binding = 6) readonly buffer Lse { float lse[]; };            // [num_q_heads], with logits

layout(push_constant) uniform Push {
  uint slots_held;
  uint slot_stride;
  uint new_slots;
  uint num_queries;
  uint sinks;
  uint recent_window;
  uint evictions;
  uint tree_span;
  uint tree_first;
  uint num_kv_heads;
  uint group_size;  // query heads per kv head, with logits
} push;

const uint WG = gl_WorkGroupSize.x;
const uint ROW_WORDS = KV_F16 ? HEAD_DIM / 2 : HEAD_DIM;

// The tree scope's ranks left and left + 1: their physical slots, S and C (copied, so that the
// choice reads no buffer entry the eviction that follows may overwrite).
shared uint slot_of_s[2];
shared float scope_sum_s[2];
shared uint scope_count_s[2];

#include "eviction_choice.glsl"

// Records a scope rank's entry: its slot, S and C.
void note_scope_slot(uint slot, uint rank, uint left, float sum, uint count) {
  slot_of_s[rank - left] = slot;
  scope_sum_s[rank - left] = sum;
  scope_count_s[rank - left] = count;
}

// The victim of eviction `eviction` (x: its rank) and its physical slot (y; NONE where not
// yet known). The first eviction's candidates (lowest S, or the scope's slots) were gathered
// by the score-update pass; later ones scan the slots again.
uvec2 choose_victim(uint base, uint held, uint eviction, Lowest lowest) {
  const uint first = push.sinks, end = held - push.recent_window;  // evictable ranks [first, end)
  if (RULE == RULE_OLDEST) return uvec2(first, NONE);
  const uint t = gl_LocalInvocationID.x;
  if (RULE == RULE_ACCUMULATED || RULE == RULE_CURRENT_QUERY) {
    if (eviction > 0) {
      lowest = no_candidate();
      for (uint slot = t; slot < held; slot += WG) note_candidate(sums[base + slot], uint(positions[base + slot]), slot, first, end, lowest);
    }
    lowest = reduce_lowest(lowest, true);
    return uvec2(lowest.rank, lowest.slot);
  }
  const uint left = first + (push.tree_first + eviction) % push.tree_span;
  if (RULE == RULE_TREE_LEFT) return uvec2(left, eviction == 0 ? slot_of_s[0] : NONE);
  if (eviction > 0) {
    for (uint slot = t; slot < held; slot += WG) {
      const uint rank = uint(positions[base + slot]);
      if (in_scope(rank, left)) note_scope_slot(slot, rank, left, sums[base + slot], counts[base + slot]);
    }
    sync();
  }
  const uint leaving = tree_leaving(scope_sum_s[0], scope_count_s[0], scope_sum_s[1], scope_count_s[1]);
  return uvec2(left + leaving, slot_of_s[leaving]);
}

// Evicts rank `victim`: lowers the ranks above it and moves the last slot's token (rank, S,
// C, K and V rows) into the freed slot. With the freed slot known, both in one pass: the
// last slot's thread writes its lowered rank to the freed slot, no thread touches the freed
// slot's own entry; else a pass finds it, then a barrier, then the move.
void evict_rank(uint base, uint held, uint victim, uint freed) {
  const uint t = gl_LocalInvocationID.x, last = held - 1;
  const bool located = freed != NONE;
  for (uint slot = t; slot < held; slot += WG) {
    if (slot == freed) continue;
    const int rank = positions[base + slot];
    const int lowered = uint(rank) > victim ? rank - 1 : rank;
    if (!located && uint(rank) == victim) slot_of_s[0] = slot;
    if (located && slot == last) {
      positions[base + freed] = lowered;
      if (KEEPS_SUMS) sums[base + freed] = sums[base + last];
      if (KEEPS_COUNTS) counts[base + freed] = counts[base + last];
    } else if (lowered != rank) {
      positions[base + slot] = lowered;
    }
  }
  if (!located) {
    sync();
    freed = slot_of_s[0];
    if (t == 0 && freed != last) {
      positions[base + freed] = positions[base + last];
      if (KEEPS_SUMS) sums[base + freed] = sums[base + last];
      if (KEEPS_COUNTS) counts[base + freed] = counts[base + last];
    }
  }
  if (freed != last) {
    const uint to_row = (base + freed) * ROW_WORDS, from_row = (base + last) * ROW_WORDS;
    for (uint w = t; w < ROW_WORDS; w += WG) {
      k_words[to_row + w] = k_words[from_row + w];
      v_words[to_row + w] = v_words[from_row + w];
    }
  }
}

// The step's score of (kv head, slot): given, or the kv head's query heads' probabilities.
float step_score(uint kv_head, uint slot, uint held) {
  if (!SCORES_FROM_LOGITS) return scores[kv_head * held + slot];
  float total = 0.0;
  for (uint g = 0; g < push.group_size; ++g)
    total += exp(scores[(kv_head * held + slot) * push.group_size + g] - lse[kv_head * push.group_size + g]);
  return total;
}

void main() {
  const uint kv_head = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint base = kv_head * push.slot_stride;
  const uint held = push.slots_held;
  // One pass updates the scores and gathers the first eviction's candidates.
  const bool evicting = push.evictions > 0;
  const uint first = push.sinks, end = evicting ? held - push.recent_window : 0u;
  const uint left = KEEPS_COUNTS && evicting ? first + push.tree_first % push.tree_span : 0u;
  Lowest lowest = no_candidate();
  if (KEEPS_SUMS) {
    const uint first_query = held - push.num_queries;
    for (uint slot = t; slot < held; slot += WG) {
      const uint rank = uint(positions[base + slot]);
      const bool fresh = slot + push.new_slots >= held;
      float sum;
      if (RULE == RULE_CURRENT_QUERY) {
        sum = 0.0;
        for (uint h = 0; h < push.num_kv_heads; ++h) sum += step_score(h, slot, held);
      } else {
        sum = (fresh ? 0.0 : sums[base + slot]) + step_score(kv_head, slot, held);
      }
      sums[base + slot] = sum;
      // Queries are the newest num_queries ranks; each sees the ranks up to its own.
      if (KEEPS_COUNTS) {
        const uint count = (fresh ? 0u : counts[base + slot]) + held - max(rank, first_query);
        counts[base + slot] = count;
        if (evicting && in_scope(rank, left)) note_scope_slot(slot, rank, left, sum, count);
      } else {
        note_candidate(sum, rank, slot, first, end, lowest);
      }
    }
    // The tree's choice reads the scope's entries other threads noted; the lowest-score rules
    // read only their own slots' until the reduction's barrier.
    if (KEEPS_COUNTS && evicting) sync();
  }
  for (uint eviction = 0; eviction < push.evictions; ++eviction) {
    // Each eviction reads what the previous one moved, by any thread.
    if (eviction > 0) sync();
    const uvec2 victim = choose_victim(base, held - eviction, eviction, lowest);
    evict_rank(base, held - eviction, victim.x, victim.y);
  }
}
