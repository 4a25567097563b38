#version 450
// Window scores, step 1: one thread per prefix slot of a kv head reads its key once (rotated
// to the slot's position) and writes its logit for every (group head, window query).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint ROPE_STYLE = 0;
layout(constant_id = 4) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { float q_rot[]; };  // [window][num_q_heads][HEAD_DIM], scaled
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Positions { int positions[]; };
layout(binding = 3) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 4) writeonly buffer Logits { float logits[]; };  // [num_q_heads][window][num_prefix]

layout(push_constant) uniform Push {
  uint num_prefix;
  uint slot_stride;
  uint window;
  uint group_size;
  uint num_q_heads;
} push;

#include "key_chunk.glsl"
#include "window_query.glsl"

void main() {
  const uint slot = gl_GlobalInvocationID.x;
  const uint kv_head = gl_WorkGroupID.y;
  if (slot >= push.num_prefix) return;
  const uint slot_base = kv_head * push.slot_stride;
  const uint position = ROPE_STYLE != 0 ? uint(positions[slot_base + slot]) : 0u;
  vec4 key[KVC_MAX_CHUNKS];
  for (uint c = 0; c < CHUNKS; ++c) key[c] = key_chunk((slot_base + slot) * HEAD_DIM, 4 * c, position);
  for (uint g = 0; g < push.group_size; ++g) {
    const uint head = kv_head * push.group_size + g;
    for (uint j = 0; j < push.window; ++j) {
      float s = 0.0;
      for (uint c = 0; c < CHUNKS; ++c) s += dot(key[c], query_chunk(j, head, c));
      logits[(head * push.window + j) * push.num_prefix + slot] = s;
    }
  }
}
