#version 450
// Packs one head's segment of cache rows into complex sequences for one FFT: sequence j
// holds dim 2j as its real part and dim 2j + 1 as its imaginary part, at window points
// window_offset .. window_offset + length - 1 of a zero-padded window of T points.
// Rows are read along the head dims and sequences written along the points, so a workgroup
// takes a tile of TILE_POINTS points through shared memory: both sides stay coalesced.
#extension GL_GOOGLE_include_directive : require
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;

layout(binding = 0) readonly buffer States { uint state_words[]; };
layout(binding = 1) writeonly buffer Work { vec2 work[]; };  // [HEAD_DIM / 2][T]

layout(push_constant) uniform Push {
  uint slot_stride;
  uint first_slot;
  uint segment_length;
  uint transform_length;
  uint window_offset;
  uint head;
} push;

const uint PAIRS = HEAD_DIM / 2u;                     // <= 128: head_dim <= 256
const uint TILE_POINTS = 2048u / PAIRS;
shared vec2 tile_s[2048u + 128u];                     // [PAIRS][TILE_POINTS + 1]: the pad spreads banks

vec2 pair_at(uint point, uint pair) {
  if (point < push.window_offset || point - push.window_offset >= push.segment_length) return vec2(0.0);
  const uint element = ((push.head * push.slot_stride + push.first_slot + point - push.window_offset) * HEAD_DIM) + 2u * pair;
  return vec2(KVC_LOAD_ELEMENT(state_words, KV_F16, element), KVC_LOAD_ELEMENT(state_words, KV_F16, element + 1u));
}

void main() {
  const uint T = push.transform_length;
  const uint tiles = (T + TILE_POINTS - 1u) / TILE_POINTS, items = PAIRS * TILE_POINTS;
  for (uint tile = gl_WorkGroupID.x; tile < tiles; tile += gl_NumWorkGroups.x) {
    const uint first_point = tile * TILE_POINTS;
    for (uint item = gl_LocalInvocationID.x; item < items; item += gl_WorkGroupSize.x) {
      const uint pair = item % PAIRS, point = item / PAIRS;  // along a row
      tile_s[pair * (TILE_POINTS + 1u) + point] = pair_at(first_point + point, pair);
    }
    barrier();
    for (uint item = gl_LocalInvocationID.x; item < items; item += gl_WorkGroupSize.x) {
      const uint point = item % TILE_POINTS, pair = item / TILE_POINTS;  // along a sequence
      if (first_point + point < T) work[pair * T + first_point + point] = tile_s[pair * (TILE_POINTS + 1u) + point];
    }
    barrier();
  }
}
