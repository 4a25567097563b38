#version 450
// FourierAttention decode, factorized route, step 4 (ops/fourier_attention.h): the input of the
// transform that gives F w, the middle's share of the compressed dims' values. In place of the
// middle's logits in W, their weights w = exp(logit - M), M the query head's largest middle logit
// (the max of fourier_middle_partials' splits), and zeros past the middle: two query heads per
// sequence, as (w_{2s}, w_{2s+1}). Workgroup (block of points, pair); block 0 also writes M, the
// reference of fourier_value_partials' partials. The points a thread takes are read before any
// is written back, so that several reads are in flight.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;

#include "elements.glsl"

layout(binding = 0) readonly buffer Partials { float partials[]; };  // [num_q_heads][num_splits][HEAD_DIM + 2]
layout(binding = 1) buffer Spectrum { vec2 spectrum[]; };            // W: [pairs][T]
layout(binding = 2) buffer HeadTerms { float head_terms[]; };        // M at [num_q_heads + head]

layout(push_constant) uniform Push {
  uint num_q_heads;
  uint num_middle;
  uint window_length;
  uint first_middle_split;
  uint middle_splits;
  uint num_splits;
} push;

const uint WG = gl_WorkGroupSize.x;
const uint POINTS = 4;  // points per thread, WG apart

#include "middle_max.glsl"

void main() {
  const uint pair = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const bool has_odd = 2 * pair + 1 < push.num_q_heads;
  const vec2 middle_max = pair_middle_max(pair, has_odd);
  if (gl_WorkGroupID.x == 0 && t == 0) {
    head_terms[push.num_q_heads + 2 * pair] = middle_max.x;
    if (has_odd) head_terms[push.num_q_heads + 2 * pair + 1] = middle_max.y;
  }

  const uint sequence = pair * push.window_length, first = gl_WorkGroupID.x * WG * POINTS + t;
  vec2 logits[POINTS];
  [[unroll]] for (uint k = 0; k < POINTS; ++k) {
    const uint point = first + k * WG;
    logits[k] = point < push.num_middle ? spectrum[sequence + point] : vec2(0.0);
  }
  [[unroll]] for (uint k = 0; k < POINTS; ++k) {
    const uint point = first + k * WG;
    if (point >= push.window_length) continue;
    const bool middle = point < push.num_middle;
    spectrum[sequence + point] = vec2(middle ? exp(logits[k].x - middle_max.x) : 0.0, middle && has_odd ? exp(logits[k].y - middle_max.y) : 0.0);
  }
}
