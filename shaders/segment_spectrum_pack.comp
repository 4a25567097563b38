#version 450
// Packs one head's segment of cache rows into complex sequences for one FFT: sequence j
// holds dim 2j as its real part and dim 2j + 1 as its imaginary part, at window points
// window_offset .. window_offset + length - 1 of a zero-padded window of T points, zero up to
// the plan's P points. CHIRP (a chirp-z transform, ops/chirp_z_vulkan.h): window point t is
// premultiplied by the chirp c[t], and P is the plan's padded length.
// Rows are read along the head dims and sequences written along the points, so a workgroup
// takes a tile of TILE_POINTS points through shared memory: both sides stay coalesced.
#extension GL_GOOGLE_include_directive : require
#include "complex.glsl"
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const bool CHIRP = false;

layout(binding = 0) readonly buffer States { uint state_words[]; };
layout(binding = 1) writeonly buffer Work { vec2 work[]; };  // [HEAD_DIM / 2][P]
layout(binding = 2) readonly buffer Chirp { vec2 chirp[]; };  // [T], CHIRP only

layout(push_constant) uniform Push {
  uint slot_stride;
  uint first_slot;
  uint segment_length;
  uint transform_length;
  uint window_offset;
  uint head;
  uint padded_length;  // P
} push;

const uint PAIRS = HEAD_DIM / 2u;                     // <= 128: head_dim <= 256
const uint TILE_POINTS = 2048u / PAIRS;
shared vec2 tile_s[2048u + 128u];                     // [PAIRS][TILE_POINTS + 1]: the pad spreads banks

vec2 pair_at(uint point, uint pair) {
  if (point < push.window_offset || point - push.window_offset >= push.segment_length) return vec2(0.0);
  const uint element = ((push.head * push.slot_stride + push.first_slot + point - push.window_offset) * HEAD_DIM) + 2u * pair;
  const vec2 value = vec2(KVC_LOAD_ELEMENT(state_words, KV_F16, element), KVC_LOAD_ELEMENT(state_words, KV_F16, element + 1u));
  return CHIRP ? complex_mul(value, chirp[point]) : value;
}

void main() {
  const uint P = push.padded_length;
  const uint tiles = (P + TILE_POINTS - 1u) / TILE_POINTS, items = PAIRS * TILE_POINTS;
  for (uint tile = gl_WorkGroupID.x; tile < tiles; tile += gl_NumWorkGroups.x) {
    const uint first_point = tile * TILE_POINTS;
    for (uint item = gl_LocalInvocationID.x; item < items; item += gl_WorkGroupSize.x) {
      const uint pair = item % PAIRS, point = item / PAIRS;  // along a row
      tile_s[pair * (TILE_POINTS + 1u) + point] = pair_at(first_point + point, pair);
    }
    barrier();
    for (uint item = gl_LocalInvocationID.x; item < items; item += gl_WorkGroupSize.x) {
      const uint point = item % TILE_POINTS, pair = item / TILE_POINTS;  // along a sequence
      if (first_point + point < P) work[pair * P + first_point + point] = tile_s[pair * (TILE_POINTS + 1u) + point];
    }
    barrier();
  }
}
