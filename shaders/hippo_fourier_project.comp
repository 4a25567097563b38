#version 450
// HiPPO-FourierT projection (ops/hippo_fourier.h): adds (1/T) F X of a segment to the
// coefficients, eq. 4 at prefill and eq. 6 for a token leaving the local window. Workgroup
// (block of BINS bins and of WG dims, head): thread j sums its dim's column against cos and sin
// of every bin of the block over the segment. The basis of the block's bins is computed once
// per workgroup, CHUNK tokens at a time (one entry per thread), into shared memory; each angle
// is reduced exactly as (n t) mod T in integers, so long windows lose no precision. Several
// bins per workgroup keep a decode step's one-token update to a few hundred workgroups, each
// reading the token's dims once.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // BINS x CHUNK = 128 threads (the host's kProjectWorkgroup): one basis entry each
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

const uint WG = gl_WorkGroupSize.x;
const uint BINS = 8;    // bins per workgroup (the host's kProjectBins)
const uint CHUNK = 16;  // tokens per basis pass: BINS x CHUNK entries, one per thread

shared vec2 basis_s[BINS * CHUNK];  // (cos, sin) of bin b at the chunk's token i: [b][i]

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint dim_blocks = (push.num_dims + WG - 1) / WG;
  const uint first_bin = (gl_WorkGroupID.x / dim_blocks) * BINS;
  const uint j = (gl_WorkGroupID.x % dim_blocks) * WG + t;
  const uint head = gl_WorkGroupID.y;
  const bool live = j < push.num_dims;
  const uint dim = live ? dims[head * push.head_dim + j] : 0u;
  const uint first_row = head * push.slot_stride + push.first_slot;
  vec2 sums[BINS];
  [[unroll]] for (uint b = 0; b < BINS; ++b) sums[b] = vec2(0.0);
  for (uint chunk = 0; chunk < push.segment_length; chunk += CHUNK) {
    barrier();  // the previous chunk's basis is read
    {
      const uint n = first_bin + t / CHUNK, i = chunk + t % CHUNK;
      basis_s[t] = n < push.num_states && i < push.segment_length
                       ? kvc_turn_cos_sin(kvc_mul_mod(n, push.first_index + i, push.window_length), push.window_length)
                       : vec2(0.0);
    }
    barrier();
    if (live) {
      float x[CHUNK];
      [[unroll]] for (uint k = 0; k < CHUNK; ++k)
        x[k] = chunk + k < push.segment_length ? KVC_LOAD_ELEMENT(row_words, ROWS_F16, (first_row + chunk + k) * push.head_dim + dim) : 0.0;
      [[unroll]] for (uint b = 0; b < BINS; ++b)
        [[unroll]] for (uint k = 0; k < CHUNK; ++k) sums[b] += basis_s[b * CHUNK + k] * x[k];
    }
  }
  if (!live) return;
  // Every coefficient is read before any is written: a store may alias a later load, so
  // interleaved read-modify-writes would wait for memory once per bin.
  const uint base = (head * 2 * push.num_states + 2 * first_bin) * push.num_dims + j;
  const uint bins = min(BINS, push.num_states - first_bin);
  vec2 previous[BINS];
  [[unroll]] for (uint b = 0; b < BINS; ++b)
    if (b < bins) previous[b] = vec2(coefficients[base + 2 * b * push.num_dims], coefficients[base + (2 * b + 1) * push.num_dims]);
  const float inv_window = 1.0 / float(push.window_length);
  [[unroll]] for (uint b = 0; b < BINS; ++b)
    if (b < bins) {
      coefficients[base + 2 * b * push.num_dims] = previous[b].x + sums[b].x * inv_window;
      coefficients[base + (2 * b + 1) * push.num_dims] = previous[b].y + sums[b].y * inv_window;
    }
}
