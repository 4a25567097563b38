#version 450
// One decode-time eviction step (see src/ops/eviction_step.h): one workgroup per kv head
// updates its slots' scores, then for each eviction picks the victim rank by RULE, lowers the
// ranks above it and moves the last physical slot's token into the freed slot. Every pass is
// a strided loop over the slots followed by a barrier, so any cache size fits one workgroup.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint RULE = 0;  // ops::EvictionRule

const uint RULE_OLDEST = 0, RULE_ACCUMULATED = 1, RULE_CURRENT_QUERY = 2, RULE_TREE = 3, RULE_TREE_LEFT = 4;
const bool KEEPS_SUMS = RULE != RULE_OLDEST;
const bool KEEPS_COUNTS = RULE == RULE_TREE || RULE == RULE_TREE_LEFT;
const uint NONE = 0xFFFFFFFFu;

// Threads read what other threads of the workgroup wrote after a barrier: coherent.
layout(binding = 0) coherent buffer Keys { uint k_words[]; };
layout(binding = 1) coherent buffer Values { uint v_words[]; };
layout(binding = 2) coherent buffer Positions { int positions[]; };  // ranks
layout(binding = 3) readonly buffer Scores { float scores[]; };      // [num_kv_heads][slots_held]
layout(binding = 4) coherent buffer Sums { float sums[]; };
layout(binding = 5) coherent buffer Counts { uint counts[]; };

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
} push;

const uint WG = gl_WorkGroupSize.x;
const uint ROW_WORDS = KV_F16 ? HEAD_DIM / 2 : HEAD_DIM;

shared float best_score_s[WG];
shared uint best_rank_s[WG];
shared uint slot_of_s[2];  // physical slots of the ranks looked up

void sync() {
  memoryBarrierBuffer();
  memoryBarrierShared();
  barrier();
}

// The reduction's rounds only exchange shared memory: no buffer barrier (a device-wide fence
// on every round of ten, at 1024 threads).
void sync_shared() {
  memoryBarrierShared();
  barrier();
}

// (score, rank) a before b: lower score, ties to the lower rank; NONE ranks last.
bool before(float score_a, uint rank_a, float score_b, uint rank_b) {
  return rank_a != NONE && (rank_b == NONE || score_a < score_b || (score_a == score_b && rank_a < rank_b));
}

// Records in slot_of_s the physical slots of ranks `left` and `left + 1`, if `slot` holds one.
void note_scope_slot(uint slot, uint rank, uint left) {
  if (rank == left || rank == left + 1) slot_of_s[rank - left] = slot;
}

// Folds one candidate into a thread's running lowest (score, rank).
void note_candidate(float score, uint rank, uint first, uint end, inout float best, inout uint best_rank) {
  if (rank >= first && rank < end && before(score, rank, best, best_rank)) best = score, best_rank = rank;
}

// The workgroup's lowest (score, rank) of the threads' candidates.
uint reduce_lowest(float best, uint best_rank) {
  const uint t = gl_LocalInvocationID.x;
  best_score_s[t] = best;
  best_rank_s[t] = best_rank;
  sync_shared();
  for (uint stride = WG / 2; stride > 0; stride /= 2) {
    if (t < stride && before(best_score_s[t + stride], best_rank_s[t + stride], best_score_s[t], best_rank_s[t])) {
      best_score_s[t] = best_score_s[t + stride];
      best_rank_s[t] = best_rank_s[t + stride];
    }
    sync_shared();
  }
  const uint result = best_rank_s[0];
  sync_shared();  // slot 0 is rewritten by the next reduction
  return result;
}

// The victim of eviction `eviction`. The first eviction's candidates (lowest S, or the
// scope's slots) were gathered by the score-update pass; later ones scan the slots again.
uint choose_victim(uint base, uint held, uint eviction, float best, uint best_rank) {
  const uint first = push.sinks, end = held - push.recent_window;  // evictable ranks [first, end)
  if (RULE == RULE_OLDEST) return first;
  const uint t = gl_LocalInvocationID.x;
  if (RULE == RULE_ACCUMULATED || RULE == RULE_CURRENT_QUERY) {
    if (eviction > 0) {
      best_rank = NONE;
      for (uint slot = t; slot < held; slot += WG) note_candidate(sums[base + slot], uint(positions[base + slot]), first, end, best, best_rank);
    }
    return reduce_lowest(best, best_rank);
  }
  const uint left = first + (push.tree_first + eviction) % push.tree_span;
  if (RULE == RULE_TREE_LEFT) return left;
  if (eviction > 0)
    for (uint slot = t; slot < held; slot += WG) note_scope_slot(slot, uint(positions[base + slot]), left);
  sync();
  const uint a = base + slot_of_s[0], b = base + slot_of_s[1];
  // S_a / C_a > S_b / C_b without a division (C > 0): products are correctly rounded on every
  // Vulkan device, division is not, and the CPU reference compares the same products.
  precise const float left_side = sums[a] * float(counts[b]);
  precise const float right_side = sums[b] * float(counts[a]);
  const uint victim = left_side > right_side ? left + 1 : left;
  sync();  // slot_of_s is rewritten by the removal
  return victim;
}

void evict_rank(uint base, uint held, uint victim) {
  const uint t = gl_LocalInvocationID.x;
  for (uint slot = t; slot < held; slot += WG) {
    const int rank = positions[base + slot];
    if (uint(rank) == victim) slot_of_s[0] = slot;
    if (uint(rank) > victim) positions[base + slot] = rank - 1;
  }
  sync();
  const uint freed = slot_of_s[0], last = held - 1;
  if (freed != last) {
    const uint to_row = (base + freed) * ROW_WORDS, from_row = (base + last) * ROW_WORDS;
    for (uint w = t; w < ROW_WORDS; w += WG) {
      k_words[to_row + w] = k_words[from_row + w];
      v_words[to_row + w] = v_words[from_row + w];
    }
    if (t == 0) {
      positions[base + freed] = positions[base + last];
      if (KEEPS_SUMS) sums[base + freed] = sums[base + last];
      if (KEEPS_COUNTS) counts[base + freed] = counts[base + last];
    }
  }
  sync();
}

void main() {
  const uint kv_head = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint base = kv_head * push.slot_stride;
  const uint held = push.slots_held;
  // One pass updates the scores and gathers the first eviction's candidates.
  const bool evicting = push.evictions > 0;
  const uint first = push.sinks, end = evicting ? held - push.recent_window : 0u;
  const uint left = KEEPS_COUNTS && evicting ? first + push.tree_first % push.tree_span : 0u;
  float best = 0.0;
  uint best_rank = NONE;
  if (KEEPS_SUMS) {
    const uint first_query = held - push.num_queries;
    for (uint slot = t; slot < held; slot += WG) {
      const uint rank = uint(positions[base + slot]);
      const bool fresh = slot + push.new_slots >= held;
      float sum;
      if (RULE == RULE_CURRENT_QUERY) {
        sum = 0.0;
        for (uint h = 0; h < push.num_kv_heads; ++h) sum += scores[h * held + slot];
      } else {
        sum = (fresh ? 0.0 : sums[base + slot]) + scores[kv_head * held + slot];
      }
      sums[base + slot] = sum;
      // Queries are the newest num_queries ranks; each sees the ranks up to its own.
      if (KEEPS_COUNTS) {
        counts[base + slot] = (fresh ? 0u : counts[base + slot]) + held - max(rank, first_query);
        if (evicting) note_scope_slot(slot, rank, left);
      } else {
        note_candidate(sum, rank, first, end, best, best_rank);
      }
    }
    sync();
  }
  for (uint eviction = 0; eviction < push.evictions; ++eviction) {
    const uint held_now = held - eviction;
    evict_rank(base, held_now, choose_victim(base, held_now, eviction, best, best_rank));
  }
}
