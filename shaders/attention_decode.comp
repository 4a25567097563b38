#version 450
// Flash-decoding, pass 1, over one cache: workgroup (split, kv head, query-head block); the
// work itself is decode_split.glsl's. attention_merge combines the splits.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

layout(binding = 0) readonly buffer Query { uint q_words[]; };  // [num_q_heads][HEAD_DIM], before RoPE
layout(binding = 1) readonly buffer Keys { uvec4 k_vec[]; };
layout(binding = 1) readonly buffer KeyWords { uint k_words[]; };  // the same keys, for RoPE partners
layout(binding = 1) readonly buffer KeyHalves { uvec2 k_halves[]; };  // and in 8-byte units (key_dim)
layout(binding = 2) readonly buffer Values { uvec4 v_vec[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 5) writeonly buffer Partials { float partials[]; };  // [num_q_heads][partials_per_head][HEAD_DIM + 2]
layout(binding = 6) writeonly buffer Logits { float logits[]; };      // [num_kv_heads][num_slots][group_size], WRITE_LOGITS only
layout(binding = 6) writeonly buffer Logits4 { vec4 logits4[]; };    // the same, 4 query heads a vector

layout(push_constant) uniform Push {
  uint num_slots;
  uint slot_stride;
  uint num_splits;
  uint partials_per_head;  // of partials[]: num_splits, or more (FourierAttention's middle, shaders/fourier_middle_partials.comp)
  uint group_size;
  float scale;  // 1 / sqrt(HEAD_DIM)
} push;

#define KVC_DECODE_QUERY_WORDS q_words
#define KVC_DECODE_KEY_VEC k_vec
#define KVC_DECODE_KEY_WORDS k_words
#define KVC_DECODE_KEY_HALVES k_halves
#define KVC_DECODE_VALUE_VEC v_vec
#define KVC_DECODE_POSITIONS positions
#define KVC_DECODE_STORE_LOGIT(index, value) logits[index] = (value)
#define KVC_DECODE_STORE_LOGIT4(index, value) logits4[index] = (value)
#include "decode_split.glsl"

void main() {
  decode_split(DecodeRange(push.num_slots, push.slot_stride, gl_WorkGroupID.x, push.num_splits, push.partials_per_head, 0u,
                           push.group_size, push.scale));
}
