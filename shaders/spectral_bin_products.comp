#version 450
// Spectral attention, the bin products: workgroup (block of BLOCK_BINS stored bins, kv head)
// forms S_K[b] . q of query first_query for every query head of the kv head's group. LANES
// threads take a bin, each every LANES-th pair of head dims, so a warp reads runs of LANES
// 16-byte pairs of complex states; the lanes' sums meet in shared memory (one exchange for all
// heads, where shuffles took a reduction tree per head and component). With FOLD, the
// window's pending token (the held slot pending_slot) first enters every state as its N-th
// token, eq. 9 as spectral_fold.comp takes it, and the state is written back: read once for
// both.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "elements.glsl"
#include "modular.glsl"

layout(local_size_x_id = 0) in;  // BLOCK_BINS * LANES
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool F16 = false;  // q and k
layout(constant_id = 3) const uint LANES = 16;
layout(constant_id = 4) const bool FOLD = false;

layout(binding = 0) readonly buffer Queries { uint q_words[]; };     // [num_queries][num_q_heads][HEAD_DIM]
layout(binding = 1) buffer KeyStates { vec4 key_states[]; };         // [num_kv_heads][num_bins][HEAD_DIM / 2] dim pairs
layout(binding = 2) writeonly buffer Products { vec2 products[]; };  // [num_q_heads][num_bins]
layout(binding = 3) readonly buffer Keys { uint k_words[]; };        // [num_kv_heads][slot_stride][HEAD_DIM]
layout(binding = 4) readonly buffer Bins { uint bins[]; };

layout(push_constant) uniform Push {
  uint num_bins;
  uint first_query;
  uint num_kv_heads;
  uint group;  // query heads per kv head
  uint slot_stride;
  uint pending_slot;
  uint segment_length;
  uint folded_point;  // N mod M: where the pending token lands
  float folded;       // N
} push;

const uint PAIRS = HEAD_DIM / 2u;
const uint MAX_PAIRS_PER_LANE = 8u;  // HEAD_DIM <= 256 over 16 lanes
const uint BLOCK_BINS = gl_WorkGroupSize.x / LANES;
shared float q_s[KVC_MAX_GROUP_BLOCK * HEAD_DIM];
shared vec2 sums_s[KVC_MAX_GROUP_BLOCK * gl_WorkGroupSize.x];

void main() {
  const uint kv_head = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const uint lane = t % LANES, local_bin = t / LANES;
  const uint q_row0 = (push.first_query * push.num_kv_heads + kv_head) * push.group;
  const uint pending = (kv_head * push.slot_stride + push.pending_slot) * HEAD_DIM;
  for (uint block = gl_WorkGroupID.x; block * BLOCK_BINS < push.num_bins; block += gl_NumWorkGroups.x) {
    const uint b = block * BLOCK_BINS + local_bin;
    const bool valid = b < push.num_bins;
    const uint state = (kv_head * push.num_bins + b) * PAIRS;
    // The row's states, all loaded before any is written back: a store between them would
    // keep the next load from issuing until it is done.
    vec4 s[MAX_PAIRS_PER_LANE];
    [[unroll]] for (uint i = 0u; i < MAX_PAIRS_PER_LANE; ++i) {
      const uint pair = lane + i * LANES;
      s[i] = valid && pair < PAIRS ? key_states[state + pair] : vec4(0.0);
    }
    if (FOLD && valid) {
      const float angle = -KVC_TWO_PI * float(kvc_mulmod(bins[b], push.folded_point, push.segment_length)) / float(push.segment_length);
      const vec2 twiddle = vec2(cos(angle), sin(angle));
      [[unroll]] for (uint i = 0u; i < MAX_PAIRS_PER_LANE; ++i) {
        const uint pair = lane + i * LANES;
        if (pair >= PAIRS) continue;
        const vec2 x = vec2(KVC_LOAD_ELEMENT(k_words, F16, pending + 2u * pair), KVC_LOAD_ELEMENT(k_words, F16, pending + 2u * pair + 1u));
        s[i] = (push.folded * s[i] + vec4(x.x * twiddle, x.y * twiddle)) / (push.folded + 1.0);
        key_states[state + pair] = s[i];
      }
    }
    // The group's heads in blocks the registers hold.
    for (uint first = 0u; first < push.group; first += KVC_MAX_GROUP_BLOCK) {
      const uint heads = min(KVC_MAX_GROUP_BLOCK, push.group - first);
      barrier();  // the previous block's q_s and sums_s are read
      for (uint i = t; i < heads * HEAD_DIM; i += gl_WorkGroupSize.x)
        q_s[i] = KVC_LOAD_ELEMENT(q_words, F16, (q_row0 + first) * HEAD_DIM + i);
      barrier();
      vec2 sums[KVC_MAX_GROUP_BLOCK];
      [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g) sums[g] = vec2(0.0);
      [[unroll]] for (uint i = 0u; i < MAX_PAIRS_PER_LANE; ++i) {
        const uint pair = lane + i * LANES;
        if (pair >= PAIRS) continue;
        [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g)
          if (g < heads) sums[g] += s[i].xy * q_s[g * HEAD_DIM + 2u * pair] + s[i].zw * q_s[g * HEAD_DIM + 2u * pair + 1u];
      }
      [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g) sums_s[g * gl_WorkGroupSize.x + t] = sums[g];
      barrier();
      // Thread (bin, head) adds its bin's lanes.
      for (uint item = t; item < BLOCK_BINS * KVC_MAX_GROUP_BLOCK; item += gl_WorkGroupSize.x) {
        const uint g_item = item % KVC_MAX_GROUP_BLOCK, bin_item = item / KVC_MAX_GROUP_BLOCK;
        const uint out_bin = block * BLOCK_BINS + bin_item;
        if (g_item >= heads || out_bin >= push.num_bins) continue;
        vec2 total = vec2(0.0);
        for (uint l = 0u; l < LANES; ++l) total += sums_s[g_item * gl_WorkGroupSize.x + bin_item * LANES + l];
        products[(kv_head * push.group + first + g_item) * push.num_bins + out_bin] = total;
      }
    }
  }
}
