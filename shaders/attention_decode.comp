#version 450
// Flash-decoding, pass 1: one query token; workgroup (split, kv head, query-head block) reads
// its split of the kv head's slots once for up to GROUP_BLOCK query heads (GQA) and writes an
// unnormalised partial (running max m, sum l, accumulator) per query head for
// attention_merge. Phase A: one thread per key computes the block's scores into shared
// memory; phase B: threads own 4 dims of V and a subset of the tile's keys, with an online
// softmax each; the key lanes are combined at the end.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // also the keys per tile
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GROUP_BLOCK = 4;
layout(constant_id = 3) const bool KV_F16 = false;
layout(constant_id = 4) const uint ROPE_STYLE = 0;
layout(constant_id = 5) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { float q_rot[]; };  // [num_q_heads][HEAD_DIM], rotated, scaled
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Values { uint v_words[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 5) writeonly buffer Partials { float partials[]; };  // [num_q_heads][num_splits][HEAD_DIM + 2]

layout(push_constant) uniform Push {
  uint num_slots;
  uint slot_stride;
  uint split_len;
  uint num_splits;
  uint group_size;
} push;

#include "key_chunk.glsl"

const uint WG = gl_WorkGroupSize.x;
const uint CHUNKS = HEAD_DIM / 4;
const uint KEY_LANES = WG / CHUNKS;

shared vec4 q_s[GROUP_BLOCK * CHUNKS];
shared float score_s[GROUP_BLOCK * WG];
shared float red_m[WG];
shared float red_l[WG];
shared vec4 red_acc[WG];

void main() {
  const uint split = gl_WorkGroupID.x;
  const uint kv_head = gl_WorkGroupID.y;
  const uint first_head = gl_WorkGroupID.z * GROUP_BLOCK;  // within the group
  const uint heads_here = min(GROUP_BLOCK, push.group_size - first_head);
  const uint t = gl_LocalInvocationID.x;
  const uint q_head0 = kv_head * push.group_size + first_head;

  for (uint i = t; i < GROUP_BLOCK * CHUNKS; i += WG) {
    const uint g = i / CHUNKS;
    const uint e = (q_head0 + g) * HEAD_DIM + (i % CHUNKS) * 4;
    q_s[i] = g < heads_here ? vec4(q_rot[e], q_rot[e + 1], q_rot[e + 2], q_rot[e + 3]) : vec4(0);
  }
  barrier();

  const uint begin = split * push.split_len;
  const uint end = min(begin + push.split_len, push.num_slots);
  const uint slot_base = kv_head * push.slot_stride;
  const uint chunk = t % CHUNKS;
  const uint key_lane = t / CHUNKS;
  const bool accumulates = key_lane < KEY_LANES;

  float m[GROUP_BLOCK];
  float l[GROUP_BLOCK];
  vec4 acc[GROUP_BLOCK];
  for (uint g = 0; g < GROUP_BLOCK; ++g) {
    m[g] = KVC_NEG_INF;
    l[g] = 0.0;
    acc[g] = vec4(0);
  }

  for (uint tile = begin; tile < end; tile += WG) {
    const uint slot = tile + t;
    if (slot < end) {
      const uint row = (slot_base + slot) * HEAD_DIM;
      const uint position = ROPE_STYLE != 0 ? uint(positions[slot_base + slot]) : 0u;
      float dots[GROUP_BLOCK];
      for (uint g = 0; g < GROUP_BLOCK; ++g) dots[g] = 0.0;
      for (uint c = 0; c < CHUNKS; ++c) {
        const vec4 key = key_chunk(row, c * 4, position);
        for (uint g = 0; g < GROUP_BLOCK; ++g) dots[g] += dot(key, q_s[g * CHUNKS + c]);
      }
      for (uint g = 0; g < GROUP_BLOCK; ++g) score_s[g * WG + t] = dots[g];
    }
    barrier();
    if (accumulates) {
      const uint tile_keys = min(WG, end - tile);
      for (uint j = key_lane; j < tile_keys; j += KEY_LANES) {
        const vec4 value = KVC_LOAD_VEC4(v_words, KV_F16, (slot_base + tile + j) * HEAD_DIM + chunk * 4);
        for (uint g = 0; g < GROUP_BLOCK; ++g) {
          const float s = score_s[g * WG + j];
          if (s > m[g]) {
            const float correction = exp(m[g] - s);
            l[g] *= correction;
            acc[g] *= correction;
            m[g] = s;
          }
          const float p = exp(s - m[g]);
          l[g] += p;
          acc[g] += p * value;
        }
      }
    }
    barrier();
  }

  for (uint g = 0; g < heads_here; ++g) {
    red_m[t] = m[g];
    red_l[t] = l[g];
    red_acc[t] = acc[g];
    barrier();
    if (key_lane == 0) {
      float m_all = KVC_NEG_INF;
      for (uint lane = 0; lane < KEY_LANES; ++lane) m_all = max(m_all, red_m[lane * CHUNKS + chunk]);
      float l_all = 0.0;
      vec4 acc_all = vec4(0);
      for (uint lane = 0; lane < KEY_LANES; ++lane) {
        const float w = exp(red_m[lane * CHUNKS + chunk] - m_all);
        l_all += red_l[lane * CHUNKS + chunk] * w;
        acc_all += red_acc[lane * CHUNKS + chunk] * w;
      }
      const uint base = ((q_head0 + g) * push.num_splits + split) * (HEAD_DIM + 2);
      if (chunk == 0) {
        partials[base] = m_all;
        partials[base + 1] = l_all;
      }
      for (uint e = 0; e < 4; ++e) partials[base + 2 + chunk * 4 + e] = acc_all[e];
    }
    barrier();
  }
}
