#version 450
// Window scores, step 2: one workgroup per (query head, window query j) row merges the row's
// per-tile (max, sum of exp) from window_logits with the window's own keys 0..j (causal,
// scored here) into the row's softmax statistics: its max logit and 1 / sum of exp.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint ROPE_STYLE = 0;
layout(constant_id = 4) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { float q_rot[]; };
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Positions { int positions[]; };
layout(binding = 3) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 4) readonly buffer Partials { vec2 partials[]; };  // [rows][num_tiles] (max, sum)
layout(binding = 5) writeonly buffer RowStats { vec2 row_stats[]; };  // [rows] (max, 1 / sum)

layout(push_constant) uniform Push {
  uint num_prefix;
  uint slot_stride;
  uint window;
  uint group_size;
  uint num_q_heads;
  uint num_tiles;
} push;

#include "key_chunk.glsl"
#include "window_query.glsl"

shared float reduce_max[gl_WorkGroupSize.x];
shared float reduce_sum[gl_WorkGroupSize.x];

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint row = gl_WorkGroupID.x;  // head * window + j
  const uint head = row / push.window;
  const uint j = row % push.window;
  const uint slot_base = (head / push.group_size) * push.slot_stride;

  // Online merge per thread over its share of the tiles and of the window's keys 0..j.
  float running_max = KVC_NEG_INF, running_sum = 0.0;
  for (uint i = thread; i < push.num_tiles + j + 1u; i += gl_WorkGroupSize.x) {
    vec2 part;
    if (i < push.num_tiles) {
      part = partials[row * push.num_tiles + i];
    } else {
      const uint slot = push.num_prefix + i - push.num_tiles;
      const uint position = ROPE_STYLE != 0 ? uint(positions[slot_base + slot]) : 0u;
      float s = 0.0;
      for (uint c = 0; c < CHUNKS; ++c) s += dot(key_chunk((slot_base + slot) * HEAD_DIM, 4 * c, position), query_chunk(j, head, c));
      part = vec2(s, 1.0);
    }
    const float new_max = max(running_max, part.x);
    running_sum = running_sum * exp(running_max - new_max) + part.y * exp(part.x - new_max);
    running_max = new_max;
  }
  reduce_max[thread] = running_max;
  reduce_sum[thread] = running_sum;
  barrier();
  for (uint half_size = gl_WorkGroupSize.x / 2u; half_size > 0u; half_size >>= 1) {
    if (thread < half_size) {
      const float a = reduce_max[thread], b = reduce_max[thread + half_size];
      const float m = max(a, b);
      reduce_sum[thread] = reduce_sum[thread] * exp(a - m) + reduce_sum[thread + half_size] * exp(b - m);
      reduce_max[thread] = m;
    }
    barrier();
  }
  if (thread == 0u) row_stats[row] = vec2(reduce_max[0], 1.0 / reduce_sum[0]);
}
