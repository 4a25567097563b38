#version 450
// FourierAttention decode, factorized route, step 1 (ops/fourier_attention.h): the input of the
// transform that gives the middle's compressed-dim logits. For query head h of kv head kv they
// are sum_c q~[c] (scale[c] (F^T C)[t][c] + offset[c]) = (F^T a)[t] + b, with a = C (q~ . scale)
// (2N values: a_cos[n] = a[2n], a_sin[n] = a[2n + 1]), b = q~ . offset and q~ the query's
// compressed dims over sqrt(d). F^T a is real: the inverse DFT of the Hermitian sequence
// H[0] = a_cos[0], H[n] = (a_cos[n] - i a_sin[n]) / 2 and H[T - n] = conj H[n] (0 < n < N), zero
// elsewhere (2N <= T keeps the halves apart). So one complex transform carries two query heads:
// the inverse DFT of W = H_{2s} + i H_{2s+1} is F^T a_{2s} + i F^T a_{2s+1}. W is written at
// spectrum_length points a pair: T for VkFFT's transform, or 2N (bin -n at 2N - n) for the
// pruned route's, which reads the nonzero bins alone.
//
// Workgroup (pair s, block of ROWS rows of C) stages the block of each head's kv head in shared
// memory (coalesced reads, all issued before any is used), writes W at the block's bins and their
// mirrors, and its share of W's zeros; block 0 also writes the pair's b. Neighbouring
// workgroups are the pairs of one kv head, which read the same block (from L2 after the first).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // a power of two, >= 256 (MAX_LOADS)
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool Q_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Query { uint q_words[]; };                    // [num_q_heads][HEAD_DIM]
layout(binding = 1) readonly buffer KeyDims { uint k_dims[]; };                   // [num_kv_heads][HEAD_DIM]
layout(binding = 2) readonly buffer KeyCoefficients { float k_coefficients[]; };  // [num_kv_heads][2N][compressed]
layout(binding = 3) readonly buffer KeyAffine { float k_affine[]; };              // [num_kv_heads][2][compressed]
layout(binding = 4) writeonly buffer Spectrum { vec2 spectrum[]; };               // W: [pairs][spectrum_length]
layout(binding = 5) writeonly buffer HeadTerms { float head_terms[]; };           // b at [head]

layout(push_constant) uniform Push {
  uint num_q_heads;
  uint group_size;
  uint num_states;
  uint spectrum_length;  // T (VkFFT's transform of the whole sequence) or 2N (the pruned route's bins)
  uint compressed;
  float scale;  // 1 / sqrt(HEAD_DIM)
} push;

const uint WG = gl_WorkGroupSize.x;
const uint ROWS = 16;          // rows of C per workgroup: ROWS / 2 bins
const uint MAX_LOADS = 16;     // ROWS x 256 (the largest head_dim) floats over a 256-thread workgroup
const uint PARTS = WG / ROWS;  // threads sharing one row's dot product

shared float q_s[2 * HEAD_DIM];       // q~ . scale of the pair's heads
shared float tile_s[ROWS * 256];      // the block, rows padded to an odd stride (no bank conflicts)
shared float part_s[WG];
shared float a_s[2 * ROWS];

// The sum of every thread's `value`; all threads get it.
float workgroup_sum(float value) {
  const uint t = gl_LocalInvocationID.x;
  part_s[t] = value;
  barrier();
  for (uint width = WG / 2; width > 0; width /= 2) {
    if (t < width) part_s[t] += part_s[t + width];
    barrier();
  }
  const float result = part_s[0];
  barrier();
  return result;
}

void main() {
  const uint pair = gl_WorkGroupID.x, block = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const uint compressed = push.compressed, stride = compressed | 1u, rows_2n = 2 * push.num_states;
  const uint first_row = block * ROWS, rows = min(ROWS, rows_2n - first_row);
  uint kv_of[2];
  [[unroll]] for (uint slot = 0; slot < 2; ++slot) {
    const uint head = 2 * pair + slot;
    kv_of[slot] = min(head, push.num_q_heads - 1) / push.group_size;
    float offset_share = 0.0;
    for (uint c = t; c < compressed; c += WG) {
      const uint kv = kv_of[slot];
      const float q = head < push.num_q_heads ? KVC_LOAD_ELEMENT(q_words, Q_F16, head * HEAD_DIM + k_dims[kv * HEAD_DIM + c]) * push.scale : 0.0;
      q_s[slot * HEAD_DIM + c] = q * k_affine[2 * kv * compressed + c];
      offset_share += q * k_affine[(2 * kv + 1) * compressed + c];
    }
    if (block == 0) {
      const float offset_dot = workgroup_sum(offset_share);
      if (t == 0 && head < push.num_q_heads) head_terms[head] = offset_dot;
    }
  }

  [[unroll]] for (uint slot = 0; slot < 2; ++slot) {
    const uint kv = kv_of[slot];
    if (slot == 0 || kv != kv_of[0]) {
      barrier();  // the previous block's readers are done
      const uint base = (kv * rows_2n + first_row) * compressed, count = rows * compressed;
      float values[MAX_LOADS];
      [[unroll]] for (uint k = 0; k < MAX_LOADS; ++k) {
        const uint i = t + k * WG;
        values[k] = i < count ? k_coefficients[base + i] : 0.0;
      }
      [[unroll]] for (uint k = 0; k < MAX_LOADS; ++k) {
        const uint i = t + k * WG;
        if (i < count) tile_s[(i / compressed) * stride + i % compressed] = values[k];
      }
    }
    barrier();
    const uint row = t / PARTS, part = t % PARTS;
    float dot = 0.0;
    if (row < rows)
      for (uint c = part; c < compressed; c += PARTS) dot += tile_s[row * stride + c] * q_s[slot * HEAD_DIM + c];
    part_s[t] = dot;
    barrier();
    if (t < ROWS) {
      float sum = 0.0;
      for (uint p = 0; p < PARTS; ++p) sum += part_s[t * PARTS + p];
      a_s[slot * ROWS + t] = sum;  // 0 for a head past the last (an odd count's pair) or a row past 2N
    }
  }
  barrier();

  const uint T = push.spectrum_length, sequence = pair * T;
  if (t < rows / 2) {
    const uint n = first_row / 2 + t;
    const float cos_even = a_s[2 * t], sin_even = a_s[2 * t + 1], cos_odd = a_s[ROWS + 2 * t], sin_odd = a_s[ROWS + 2 * t + 1];
    if (n == 0) {
      spectrum[sequence] = vec2(cos_even, cos_odd);
    } else {
      spectrum[sequence + n] = 0.5 * vec2(cos_even + sin_odd, cos_odd - sin_even);
      spectrum[sequence + T - n] = 0.5 * vec2(cos_even - sin_odd, cos_odd + sin_even);
    }
  }
  // Bins N .. T - N hold nothing; VkFFT's transform ran in place, so they are written every time
  // (the pruned route's one, bin N, is never read).
  const uint zeros = T - 2 * push.num_states + 1;
  for (uint i = block * WG + t; i < zeros; i += gl_NumWorkGroups.y * WG) spectrum[sequence + push.num_states + i] = vec2(0.0);
}
