#version 450
// Causal attention of a chunk of queries over the cache (its own tokens are the last
// num_queries slots). One thread per query row (query i, head g of the kv head's group);
// a workgroup covers WG consecutive rows of one kv head and streams that head's keys and
// values through shared memory in tiles of KEY_TILE slots, RoPE applied on load.
// Writes the output and each row's log-sum-exp (for attention_scores).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint KEY_TILE = 16;
layout(constant_id = 3) const bool KV_F16 = false;
layout(constant_id = 4) const uint ROPE_STYLE = 0;
layout(constant_id = 5) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { float q_rot[]; };  // [num_queries][num_q_heads][HEAD_DIM]
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Values { uint v_words[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 5) writeonly buffer Out { uint out_words[]; };
layout(binding = 6) writeonly buffer Lse { float lse[]; };  // [num_queries][num_q_heads]

layout(push_constant) uniform Push {
  uint num_slots;
  uint slot_stride;
  uint num_queries;
  uint group_size;
  uint num_q_heads;
} push;

#include "key_chunk.glsl"

const uint WG = gl_WorkGroupSize.x;
const uint CHUNKS = HEAD_DIM / 4;

shared vec4 k_s[KEY_TILE * CHUNKS];
shared vec4 v_s[KEY_TILE * CHUNKS];

void main() {
  const uint kv_head = gl_WorkGroupID.y;
  const uint rows = push.num_queries * push.group_size;
  const uint row = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x;
  const bool has_row = row < rows;
  const uint query = row / push.group_size;
  const uint head = kv_head * push.group_size + row % push.group_size;
  const uint first_chunk_slot = push.num_slots - push.num_queries;
  const uint last_visible = first_chunk_slot + query;  // causal: slots <= own slot
  const uint last_row = min(gl_WorkGroupID.x * WG + WG, rows) - 1;
  const uint tiles_end = first_chunk_slot + last_row / push.group_size + 1;
  const uint slot_base = kv_head * push.slot_stride;

  vec4 q[KVC_MAX_CHUNKS];
  vec4 acc[KVC_MAX_CHUNKS];
  const uint q_base = (query * push.num_q_heads + head) * HEAD_DIM;
  for (uint c = 0; c < CHUNKS; ++c) {
    q[c] = has_row ? vec4(q_rot[q_base + 4 * c], q_rot[q_base + 4 * c + 1], q_rot[q_base + 4 * c + 2], q_rot[q_base + 4 * c + 3])
                   : vec4(0);
    acc[c] = vec4(0);
  }
  float m = KVC_NEG_INF;
  float l = 0.0;

  for (uint tile = 0; tile < tiles_end; tile += KEY_TILE) {
    for (uint e = gl_LocalInvocationID.x; e < KEY_TILE * CHUNKS; e += WG) {
      const uint slot = tile + e / CHUNKS;
      const uint c = e % CHUNKS;
      if (slot < tiles_end) {
        const uint row_element = (slot_base + slot) * HEAD_DIM;
        const uint position = ROPE_STYLE != 0 ? uint(positions[slot_base + slot]) : 0u;
        k_s[e] = key_chunk(row_element, 4 * c, position);
        v_s[e] = KVC_LOAD_VEC4(v_words, KV_F16, row_element + 4 * c);
      }
    }
    barrier();
    if (has_row && tile <= last_visible) {
      const uint keys = min(KEY_TILE, last_visible - tile + 1);
      for (uint j = 0; j < keys; ++j) {
        float s = 0.0;
        for (uint c = 0; c < CHUNKS; ++c) s += dot(q[c], k_s[j * CHUNKS + c]);
        if (s > m) {
          const float correction = exp(m - s);
          l *= correction;
          for (uint c = 0; c < CHUNKS; ++c) acc[c] *= correction;
          m = s;
        }
        const float p = exp(s - m);
        l += p;
        for (uint c = 0; c < CHUNKS; ++c) acc[c] += p * v_s[j * CHUNKS + c];
      }
    }
    barrier();
  }

  if (!has_row) return;
  const uint out_base = (query * push.num_q_heads + head) * HEAD_DIM;
  for (uint c = 0; c < CHUNKS; ++c) {
    const vec4 o = acc[c] / l;
    const uint e = out_base + 4 * c;
    if (KV_F16) {
      out_words[e / 2] = packHalf2x16(o.xy);
      out_words[e / 2 + 1] = packHalf2x16(o.zw);
    } else {
      out_words[e] = floatBitsToUint(o.x);
      out_words[e + 1] = floatBitsToUint(o.y);
      out_words[e + 2] = floatBitsToUint(o.z);
      out_words[e + 3] = floatBitsToUint(o.w);
    }
  }
  lse[query * push.num_q_heads + head] = m + log(l);
}
