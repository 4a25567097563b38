#version 450
// FourierAttention decode, factorized route, step 6 (ops/fourier_attention.h): the compressed
// dims' share of the middle's values. For query head h and compressed dim c of V (output dim
// v_dims[c]), sum_t w_t (scale[c] (F^T C_v)[t][c] + offset[c]) = scale[c] (C_v^T F w)[c] +
// offset[c] sum_t w_t, with F w from the forward transform of W: bin n of head h's spectrum E has
// re = sum w cos, im = -sum w sin, and bin 0's re is sum w. A sequence holds two heads,
// w_{2s} + i w_{2s+1}, separated as E_{2s}[n] = (Z[n] + conj Z[T-n]) / 2 and E_{2s+1}[n] =
// (Z[n] - conj Z[T-n]) / 2i. Z comes from VkFFT's length-T transform (one run of T bins a
// sequence) or from fourier_weights_transform (blocks of 2N bins, bin k at k mod 2N, whose sum
// is Z). Workgroup (block of BINS bins, kv head, block of GROUP_BLOCK query
// heads): thread c reads C_v's rows of the block (coalesced, several reads in flight) and writes,
// per query head, one more partial for attention_merge: max M (the weights' reference), sum 0
// (fourier_middle_partials counted the weights), the block's share at the compressed dims, 0 elsewhere.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // >= HEAD_DIM
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GROUP_BLOCK = 4;  // divides the group
layout(constant_id = 3) const uint BINS = 8;         // bins per workgroup

#include "elements.glsl"

layout(binding = 0) readonly buffer Spectrum { vec2 spectrum[]; };                  // Z: [pairs][blocks][spectrum_length]
layout(binding = 1) readonly buffer ValueDims { uint v_dims[]; };                   // [num_kv_heads][HEAD_DIM]
layout(binding = 2) readonly buffer ValueCoefficients { float v_coefficients[]; };  // [num_kv_heads][2N][compressed]
layout(binding = 3) readonly buffer ValueAffine { float v_affine[]; };              // [num_kv_heads][2][compressed]
layout(binding = 4) readonly buffer HeadTerms { float head_terms[]; };              // M at [num_q_heads + head]
layout(binding = 5) writeonly buffer Partials { float partials[]; };                // [num_q_heads][num_splits][HEAD_DIM + 2]

layout(push_constant) uniform Push {
  uint num_q_heads;
  uint group_size;
  uint num_states;
  uint spectrum_length;  // a block's bins: T (bin k at k mod T) or 2N (at k mod 2N)
  uint spectrum_blocks;  // blocks whose sum is Z
  uint compressed;
  uint first_split;  // this dispatch's block 0
  uint num_splits;
} push;

const uint BATCH = 8;  // bins whose coefficients a thread reads before using them
const uint SUM_BATCH = 4;  // spectrum blocks a thread reads before adding them

shared vec2 bin_s[GROUP_BLOCK * BINS];

void main() {
  const uint block = gl_WorkGroupID.x, kv = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const uint head0 = kv * push.group_size + gl_WorkGroupID.z * GROUP_BLOCK;
  const uint first_bin = block * BINS, bins = min(BINS, push.num_states - first_bin), length = push.spectrum_length;
  for (uint i = t; i < GROUP_BLOCK * BINS; i += gl_WorkGroupSize.x) {
    const uint head = head0 + i / BINS, n = first_bin + i % BINS;
    if (n >= push.num_states) continue;
    const uint sequence = (head >> 1) * push.spectrum_blocks * length;
    // The blocks' shares a few at a time, their loads issued together.
    vec2 z = vec2(0.0), mirror = vec2(0.0);
    for (uint first = 0; first < push.spectrum_blocks; first += SUM_BATCH) {
      vec2 shares[SUM_BATCH], mirrors[SUM_BATCH];
      [[unroll]] for (uint k = 0; k < SUM_BATCH; ++k) {
        const uint at = sequence + (first + k) * length;
        const bool real = first + k < push.spectrum_blocks;
        shares[k] = real ? spectrum[at + n] : vec2(0.0);
        mirrors[k] = real ? spectrum[at + (n == 0 ? 0 : length - n)] : vec2(0.0);
      }
      [[unroll]] for (uint k = 0; k < SUM_BATCH; ++k) {
        z += shares[k];
        mirror += mirrors[k];
      }
    }
    mirror.y = -mirror.y;
    const vec2 d = 0.5 * (z - mirror);
    bin_s[i] = (head & 1u) == 0 ? 0.5 * (z + mirror) : vec2(d.y, -d.x);
  }
  barrier();

  const uint compressed = push.compressed;
  float acc[KVC_MAX_GROUP_BLOCK];
  [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) acc[b] = 0.0;
  if (t < compressed) {
    const uint base = (kv * 2 * push.num_states + 2 * first_bin) * compressed + t;
    for (uint first = 0; first < bins; first += BATCH) {
      float cos_rows[BATCH], sin_rows[BATCH];
      [[unroll]] for (uint k = 0; k < BATCH; ++k) {
        const bool real = first + k < bins;
        cos_rows[k] = real ? v_coefficients[base + 2 * (first + k) * compressed] : 0.0;
        sin_rows[k] = real ? v_coefficients[base + (2 * (first + k) + 1) * compressed] : 0.0;
      }
      [[unroll]] for (uint k = 0; k < BATCH; ++k)
        if (first + k < bins)
          [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {
            const vec2 bin = bin_s[b * BINS + first + k];
            acc[b] += cos_rows[k] * bin.x - sin_rows[k] * bin.y;
          }
    }
  }

  if (t < HEAD_DIM) {
    const uint d = v_dims[kv * HEAD_DIM + t];
    const float scale = t < compressed ? v_affine[2 * kv * compressed + t] : 0.0;
    const float offset = t < compressed && block == 0 ? v_affine[(2 * kv + 1) * compressed + t] : 0.0;
    [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {
      const uint base = ((head0 + b) * push.num_splits + push.first_split + block) * (HEAD_DIM + 2);
      partials[base + 2 + d] = scale * acc[b] + offset * bin_s[b * BINS].x;
      if (t == 0) {
        partials[base] = head_terms[push.num_q_heads + head0 + b];
        partials[base + 1] = 0.0;
      }
    }
  }
}
