#version 450
// Flash-decoding over one cache: workgroup (split, kv head, query-head block); the split's work
// is decode_split.glsl's. The block's last workgroup to finish merges every split's partials
// into the output, so no second dispatch (nor the barrier before it) follows.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

layout(binding = 0) readonly buffer Query { uint q_words[]; };  // [num_q_heads][HEAD_DIM], before RoPE
layout(binding = 1) readonly buffer Keys { uvec4 k_vec[]; };
layout(binding = 1) readonly buffer KeyWords { uint k_words[]; };  // the same keys, for RoPE partners
layout(binding = 2) readonly buffer Values { uvec4 v_vec[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) readonly buffer Turns { uvec2 turns[]; };
// [num_q_heads][num_splits][HEAD_DIM + 2]; coherent: the merging workgroup reads the others' partials.
layout(binding = 5) coherent buffer Partials { float partials[]; };
layout(binding = 6) writeonly buffer Logits { float logits[]; };  // [num_q_heads][num_slots], WRITE_LOGITS only
layout(binding = 7) writeonly buffer Out { uint out_words[]; };   // [num_q_heads][HEAD_DIM], the cache dtype
layout(binding = 8) writeonly buffer Lse { float lse[]; };        // [num_q_heads]
// Per query-head block: workgroups that finished; zero between dispatches (the last puts it back).
layout(binding = 9) coherent buffer Tickets { uint tickets[]; };

layout(push_constant) uniform Push {
  uint num_slots;
  uint slot_stride;
  uint num_splits;
  uint group_size;
  float scale;  // 1 / sqrt(HEAD_DIM)
} push;

#define KVC_DECODE_QUERY_WORDS q_words
#define KVC_DECODE_KEY_VEC k_vec
#define KVC_DECODE_KEY_WORDS k_words
#define KVC_DECODE_VALUE_VEC v_vec
#define KVC_DECODE_POSITIONS positions
#define KVC_DECODE_STORE_LOGIT(index, value) logits[index] = (value)
#include "decode_split.glsl"

const bool OUT_F16 = KV_F16;
#define KVC_MERGE_OUT_WORDS out_words
#include "merge_splits.glsl"

shared bool last_of_block_s;

void main() {
  decode_split(DecodeRange(push.num_slots, push.slot_stride, gl_WorkGroupID.x, push.num_splits, 0u, push.group_size, push.scale));

  // The threadfence-reduction pattern: every thread's partials are made visible before the
  // workgroup takes its ticket; the workgroup that takes the block's last ticket sees every
  // split's partials.
  memoryBarrierBuffer();
  barrier();
  const uint block = gl_WorkGroupID.y * gl_NumWorkGroups.z + gl_WorkGroupID.z;  // = its first query head / GROUP_BLOCK
  if (gl_LocalInvocationID.x == 0) last_of_block_s = atomicAdd(tickets[block], 1u) == push.num_splits - 1u;
  barrier();
  if (!last_of_block_s) return;
  memoryBarrierBuffer();
  for (uint g = 0; g < GROUP_BLOCK; ++g) {
    const uint head = block * GROUP_BLOCK + g;
    merge_splits(head * push.num_splits, push.num_splits, head, head);
  }
  if (gl_LocalInvocationID.x == 0) tickets[block] = 0u;
}
