// The first half of a decode step's eviction under a rule that reads the step's attention
// (H2O's Accumulated, TOVA's CurrentQuery, TreeKV's Tree and TreeLeft; ops/eviction_step.h),
// for LAYERS layers at once (the grid's z; each layer's buffers an element of the binding
// arrays): each workgroup takes a block of WG * SLOTS_PER_THREAD slots of one kv head (of every
// kv head under TOVA's rule, whose score of a slot is the same for each), forms their step
// scores from the decode's logits and log-sum-exps (the merge's), updates S (and C)
// with eviction_step.comp's expressions in its order, and leaves candidates for the victim
// (evicted_candidates.glsl): the block's lowest (score, rank, slot), or the tree scope's
// entries it holds. evict_one_kernel.glsl then chooses from them and evicts, a thread a few
// slots. A decode step's layers run their attention alone, as FULL's do, and an engine's step
// scores and evicts its layers in these two kernels at its end (ops/decode_evict.h), layers
// alike in the kernels' constants in one dispatch each. The includer defines KVC_LAYER
// (eviction_scores.comp, eviction_scores_layers.comp).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint RULE = 1;  // ops::EvictionRule: Accumulated, CurrentQuery, Tree or TreeLeft
layout(constant_id = 2) const uint LAYERS = 1;  // the binding arrays' length
// Query heads per kv head, and the kv heads (which TOVA's score of a slot sums; the host gives 1
// under the other rules): constants, so that the loops over them unroll and a thread's logits
// loads are in flight together, where a loop to a push constant waited for each load in turn.
layout(constant_id = 3) const uint GROUP = 1;
layout(constant_id = 4) const uint KV_HEADS = 1;
// Slots a thread scores (ops' kScoredSlotsPerThread): a fixed bound, since it sizes register
// arrays (elements.glsl says why not a specialization constant).
const uint SLOTS_PER_THREAD = 4;

const uint RULE_CURRENT_QUERY = 2, RULE_TREE = 3, RULE_TREE_LEFT = 4;
const uint SUMMED_KV_HEADS = RULE == RULE_CURRENT_QUERY ? KV_HEADS : 1u;
const bool KEEPS_COUNTS = RULE == RULE_TREE || RULE == RULE_TREE_LEFT;

layout(binding = 0) readonly buffer Positions { int ranks[]; } ranks_of[LAYERS];   // [num_kv_heads][slot_stride]
layout(binding = 1) readonly buffer Logits { float logits[]; } logits_of[LAYERS];  // [num_kv_heads][slots_held][GROUP]
layout(binding = 1) readonly buffer Logits4 { vec4 logits4[]; } logits4_of[LAYERS];  // the same, 4 query heads a vector
layout(binding = 2) readonly buffer Lse { float lse[]; } lse_of[LAYERS];           // [num_q_heads]
layout(binding = 3) buffer Sums { float words[]; } sums_of[LAYERS];                // [num_kv_heads][slot_stride]
layout(binding = 4) buffer Counts { uint words[]; } counts_of[LAYERS];             // tree rules only
layout(binding = 5) writeonly buffer Candidates { uint words[]; } candidates_of[LAYERS];  // [num_kv_heads][entries][3]

layout(push_constant) uniform Push {
  uint slots_held;  // before the eviction
  uint slot_stride;
  uint new_slots;
  uint sinks;
  uint recent_window;
  uint evictions;  // 0 or 1
  uint tree_span;
  uint tree_first;
  uint entries;     // candidate entries per kv head: max(slot blocks, 2)
} push;

// The workgroup's layer: KVC_LAYER, which the kernel's file defines (the constant 0 where a
// dispatch takes one layer, so that a device need not index buffer arrays dynamically).
#define positions ranks_of[KVC_LAYER].ranks
#define logits logits_of[KVC_LAYER].logits
#define logits4 logits4_of[KVC_LAYER].logits4
#define lse lse_of[KVC_LAYER].lse
#define sums sums_of[KVC_LAYER].words
#define counts counts_of[KVC_LAYER].words
#define candidates candidates_of[KVC_LAYER].words

const uint WG = gl_WorkGroupSize.x;
#include "eviction_choice.glsl"
#include "evicted_candidates.glsl"

void write_candidate(uint kv_head, uint entry, uint key, uint second, uint slot) {
  const uint at = entry_at(kv_head, entry);
  candidates[at] = key;
  candidates[at + 1] = second;
  candidates[at + 2] = slot;
}

// Kv head `kv_head`'s probability at `slot`: its query heads' exp(logit - lse) summed in order,
// as decode_scores.comp and eviction_step.comp form it.
// A slot's logits are side by side: where the group is a multiple of 4, 16-byte loads.
float head_probability(uint kv_head, uint slot) {
  const uint first = (kv_head * push.slots_held + slot) * GROUP;
  float total = 0.0;
  if (GROUP % 4 == 0) {
    [[unroll]] for (uint g = 0; g < GROUP; g += 4) {
      const vec4 four = logits4[(first + g) / 4];
      [[unroll]] for (uint i = 0; i < 4; ++i) total += exp(four[i] - lse[kv_head * GROUP + g + i]);
    }
  } else {
    [[unroll]] for (uint g = 0; g < GROUP; ++g) total += exp(logits[first + g] - lse[kv_head * GROUP + g]);
  }
  return total;
}

// Kv head `kv_head`'s slots of block `block`: S (and C) updated with the step's `scores` of
// them, and the candidates they hold.
void update(uint block, uint kv_head, float scores[SLOTS_PER_THREAD]) {
  const uint t = gl_LocalInvocationID.x, held = push.slots_held, base = kv_head * push.slot_stride;
  const bool evicting = push.evictions > 0;
  const uint first = push.sinks, end = evicting ? held - push.recent_window : 0u;
  const uint left = KEEPS_COUNTS && evicting ? first + push.tree_first % push.tree_span : 0u;
  // Every load first (a slot past the end repeats the last, never stored), so that they are
  // in flight together: the stores below could alias them.
  int ranks[SLOTS_PER_THREAD];
  float sums_before[SLOTS_PER_THREAD];
  uint counts_before[SLOTS_PER_THREAD];
  [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i) {
    const uint slot = min((block * SLOTS_PER_THREAD + i) * WG + t, held - 1u);
    ranks[i] = positions[base + slot];
    sums_before[i] = sums[base + slot];
    counts_before[i] = KEEPS_COUNTS ? counts[base + slot] : 0u;
  }
  Lowest lowest = no_candidate();
  [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i) {
    const uint slot = (block * SLOTS_PER_THREAD + i) * WG + t;
    if (slot >= held) continue;
    const uint rank = uint(ranks[i]);
    const bool fresh = slot + push.new_slots >= held;
    // TOVA's S is the step's score alone; the others accumulate.
    const float sum = RULE == RULE_CURRENT_QUERY ? scores[i] : (fresh ? 0.0 : sums_before[i]) + scores[i];
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
  if (t == 0) write_candidate(kv_head, block, floatBitsToUint(lowest.score), lowest.rank, lowest.slot);
}

// Workgroup (block, kv head, layer); under TOVA's rule (block, 0, layer): a slot's score is
// then every kv head's probability summed, as eviction_step.comp sums them, the same for each
// kv head's S at that slot, so it is formed once and the kv heads take it in turn.
void main() {
  const uint block = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint first_head = RULE == RULE_CURRENT_QUERY ? 0u : gl_WorkGroupID.y;
  float scores[SLOTS_PER_THREAD];
  [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i) scores[i] = 0.0;
  // Kv heads outer, slots inner: every slot's loads of a kv head issue together.
  [[unroll]] for (uint h = 0; h < SUMMED_KV_HEADS; ++h) {
    [[unroll]] for (uint i = 0; i < SLOTS_PER_THREAD; ++i) {
      const uint slot = min((block * SLOTS_PER_THREAD + i) * WG + t, push.slots_held - 1u);
      scores[i] += head_probability(first_head + h, slot);
    }
  }
  if (RULE != RULE_CURRENT_QUERY) {
    update(block, gl_WorkGroupID.y, scores);
    return;
  }
  for (uint kv_head = 0; kv_head < KV_HEADS; ++kv_head) {
    // reduce_lowest's shared entries are read by every thread before the next kv head's rewrite them.
    if (kv_head > 0) barrier();
    update(block, kv_head, scores);
  }
}
