#version 450
// Spectral attention, pass 4: item (query row, dim) adds the segment's value sum to the held
// slots' share: sum_b w_b Re(S_V[b] conj(P[k_b])), P the forward transform of the segment's
// probabilities.
#extension GL_GOOGLE_include_directive : require
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;

layout(binding = 0) readonly buffer ValueStates { vec2 value_states[]; };  // [num_kv_heads][num_bins][HEAD_DIM]
layout(binding = 1) readonly buffer Bins { uint bins[]; };
layout(binding = 2) readonly buffer Spectra { vec2 spectra[]; };           // [rows][segment_length]
layout(binding = 3) readonly buffer HeldOutput { float held_out[]; };      // [rows][HEAD_DIM]
layout(binding = 4) writeonly buffer Out { uint out_words[]; };            // [rows][HEAD_DIM]

layout(push_constant) uniform Push {
  uint num_bins;
  uint segment_length;
  uint rows;
  uint num_q_heads;
  uint group;
} push;

void main() {
  // Two dims per item, so an f16 output is written as whole words.
  const uint items = push.rows * HEAD_DIM / 2u;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint row = item / (HEAD_DIM / 2u);
    const uint dim = 2u * (item % (HEAD_DIM / 2u));
    const uint kv_head = (row % push.num_q_heads) / push.group;
    vec2 sum = vec2(held_out[row * HEAD_DIM + dim], held_out[row * HEAD_DIM + dim + 1u]);
    for (uint b = 0; b < push.num_bins; ++b) {
      const uint bin = bins[b];
      const float weight = bin == 0u || 2u * bin == push.segment_length ? 1.0 : 2.0;
      const vec2 p = spectra[row * push.segment_length + bin] * weight;
      const uint state = (kv_head * push.num_bins + b) * HEAD_DIM + dim;
      sum += vec2(dot(value_states[state], p), dot(value_states[state + 1u], p));
    }
    const uint element = row * HEAD_DIM + dim;
    if (OUT_F16) {
      out_words[element >> 1] = packHalf2x16(sum);
    } else {
      out_words[element] = floatBitsToUint(sum.x);
      out_words[element + 1u] = floatBitsToUint(sum.y);
    }
  }
}
