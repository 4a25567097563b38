#version 450
// out = out_scale * RoPE(in) for rows [num_tokens][num_heads][HEAD_DIM]. f32 output: one thread
// per rotary pair or unrotated dim of a row. f16 output: one thread per 4 dims (key_chunk.glsl,
// as the kernels that rotate keys on load compute them), so no two threads share a word.
// Spec constants: see layout(constant_id) below.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool IN_F16 = false;
layout(constant_id = 3) const uint ROPE_STYLE = 0;
layout(constant_id = 4) const uint ROTARY_DIMS = 0;
layout(constant_id = 5) const bool OUT_F16 = false;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer In { uint in_words[]; };
layout(binding = 1) readonly buffer Positions { int positions[]; };
layout(binding = 2) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 0) readonly buffer KeyWords { uint k_words[]; };  // the input as key_chunk reads it
layout(binding = 3) writeonly buffer Out { float out_values[]; };
layout(binding = 3) writeonly buffer OutHalves { uvec2 out_quads[]; };  // OUT_F16: 4 halves an item

layout(push_constant) uniform Push {
  uint num_rows;  // tokens * heads
  uint num_heads;
  float out_scale;
  uint positions_first;  // element of positions[] that token 0 reads
  uint in_first;         // element of the input that row 0 starts at (a multiple of 4)
} push;

const bool KV_F16 = IN_F16;
#include "key_chunk.glsl"

const uint kItemsPerRow = OUT_F16 ? HEAD_DIM / 4 : ROTARY_DIMS / 2 + (HEAD_DIM - ROTARY_DIMS);

uint row_position(uint row) {
  return ROPE_STYLE == 0 ? 0u : uint(positions[push.positions_first + row / push.num_heads]);
}

void main() {
  // Grid-stride: a dispatch is capped at 65535 workgroups, a long chunk has more items.
  const uint items = push.num_rows * kItemsPerRow;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint row = item / kItemsPerRow;
    const uint k = item % kItemsPerRow;
    const uint base = row * HEAD_DIM, in_base = push.in_first + base;
    if (OUT_F16) {
      const vec4 y = key_chunk(in_base, 4u * k, row_position(row)) * push.out_scale;
      out_quads[item] = uvec2(packHalf2x16(y.xy), packHalf2x16(y.zw));
    } else if (k < ROTARY_DIMS / 2) {
      const uvec2 dims = rope_pair_dims(k);
      const uint position = row_position(row);
      const vec2 x = vec2(KVC_LOAD_ELEMENT(in_words, IN_F16, in_base + dims.x), KVC_LOAD_ELEMENT(in_words, IN_F16, in_base + dims.y));
      const vec2 y = rope_rotate(x, rope_cos_sin(position, turns[k])) * push.out_scale;
      out_values[base + dims.x] = y.x;
      out_values[base + dims.y] = y.y;
    } else {
      const uint d = ROTARY_DIMS + (k - ROTARY_DIMS / 2);
      out_values[base + d] = KVC_LOAD_ELEMENT(in_words, IN_F16, in_base + d) * push.out_scale;
    }
  }
}
