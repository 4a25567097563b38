#version 450
// Spectral attention, the bin products: item (stored bin, kv head) forms S_K[b] . q of query
// first_query for every query head of the kv head's group, reading the bin's key state once
// for all of them. One subgroup per item, its lanes over the head dims, so a bin's row of
// HEAD_DIM complex states is read coalesced; the lanes' sums meet by XOR shuffles (which, as
// in attention_decode, take invocation t as lane t % gl_SubgroupSize: the workgroup is a
// multiple of every subgroup size).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool Q_F16 = false;

layout(binding = 0) readonly buffer Queries { uint q_words[]; };        // [num_queries][num_q_heads][HEAD_DIM]
layout(binding = 1) readonly buffer KeyStates { vec2 key_states[]; };   // [num_kv_heads][num_bins][HEAD_DIM]
layout(binding = 2) writeonly buffer Products { vec2 products[]; };     // [num_q_heads][num_bins]

layout(push_constant) uniform Push {
  uint num_bins;
  uint first_query;
  uint num_kv_heads;
  uint group;  // query heads per kv head
} push;

void main() {
  const uint items = push.num_bins * push.num_kv_heads;
  const uint lane = gl_SubgroupInvocationID;
  for (uint item = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; item < items; item += gl_NumWorkGroups.x * gl_NumSubgroups) {
    const uint bin = item % push.num_bins;
    const uint kv_head = item / push.num_bins;
    const uint state = (kv_head * push.num_bins + bin) * HEAD_DIM;
    // The group's heads in blocks the registers hold.
    for (uint first = 0; first < push.group; first += KVC_MAX_GROUP_BLOCK) {
      const uint heads = min(KVC_MAX_GROUP_BLOCK, push.group - first);
      // Loops over the whole block with constant trip counts keep sums[] in registers.
      vec2 sums[KVC_MAX_GROUP_BLOCK];
      [[unroll]] for (uint g = 0; g < KVC_MAX_GROUP_BLOCK; ++g) sums[g] = vec2(0.0);
      const uint row0 = kv_head * push.group + first;
      const uint q_row0 = push.first_query * push.num_kv_heads * push.group + row0;
      for (uint d = lane; d < HEAD_DIM; d += gl_SubgroupSize) {
        const vec2 s = key_states[state + d];
        [[unroll]] for (uint g = 0; g < KVC_MAX_GROUP_BLOCK; ++g)
          if (g < heads) sums[g] += s * KVC_LOAD_ELEMENT(q_words, Q_F16, (q_row0 + g) * HEAD_DIM + d);
      }
      [[unroll]] for (uint g = 0; g < KVC_MAX_GROUP_BLOCK; ++g) {
        if (g >= heads) continue;
        for (uint mask = gl_SubgroupSize / 2u; mask > 0u; mask /= 2u) sums[g] += subgroupShuffleXor(sums[g], mask);
        if (lane == 0u) products[(row0 + g) * push.num_bins + bin] = sums[g];
      }
    }
  }
}
