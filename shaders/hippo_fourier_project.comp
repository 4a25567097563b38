#version 450
// HiPPO-FourierT projection (ops/hippo_fourier.h): adds (1/T) F X of a segment to the
// coefficients, eq. 4 at prefill and eq. 6 for a token leaving the local window. Workgroup
// (bin n and a block of dims, head); thread j sums its dim's column against cos and sin of bin
// n over the segment. Every thread of a group computes the same angle, reduced exactly as
// (n t) mod T in integers, so long windows lose no precision.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool ROWS_F16 = false;

#include "elements.glsl"
#include "fourier_turn.glsl"

layout(binding = 0) readonly buffer Rows { uint row_words[]; };        // [heads][slot_stride][head_dim]
layout(binding = 1) readonly buffer Dims { uint dims[]; };             // [heads][head_dim]
layout(binding = 2) buffer Coefficients { float coefficients[]; };     // [heads][2N][num_dims]

layout(push_constant) uniform Push {
  uint head_dim;
  uint num_states;
  uint window_length;
  uint num_dims;
  uint slot_stride;
  uint first_slot;
  uint segment_length;
  uint first_index;
} push;

void main() {
  const uint dim_blocks = (push.num_dims + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;
  const uint n = gl_WorkGroupID.x / dim_blocks;
  const uint j = (gl_WorkGroupID.x % dim_blocks) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  const uint head = gl_WorkGroupID.y;
  if (j >= push.num_dims) return;
  const uint dim = dims[head * push.head_dim + j];
  const uint first_row = head * push.slot_stride + push.first_slot;
  // The turn of token i is (n (first_index + i)) mod T, stepped by n mod T from the first.
  const uint step = n % push.window_length;
  uint turn = kvc_mul_mod(n, push.first_index, push.window_length);
  float cos_sum = 0.0, sin_sum = 0.0;
  for (uint i = 0; i < push.segment_length; ++i) {
    const float x = KVC_LOAD_ELEMENT(row_words, ROWS_F16, (first_row + i) * push.head_dim + dim);
    const vec2 basis = kvc_turn_cos_sin(turn, push.window_length);
    cos_sum += basis.x * x;
    sin_sum += basis.y * x;
    turn += step;
    if (turn >= push.window_length) turn -= push.window_length;
  }
  const uint base = (head * 2 * push.num_states + 2 * n) * push.num_dims + j;
  const float inv_window = 1.0 / float(push.window_length);
  coefficients[base] += cos_sum * inv_window;
  coefficients[base + push.num_dims] += sin_sum * inv_window;
}
