#version 450
// FourierAttention decode, factorized route, step 1 (ops/fourier_attention.h): per query head h
// of kv head kv, the middle's compressed-dim logits are sum_c q~[c] (scale[c] (F^T C)[t][c] +
// offset[c]) = (F^T a)[t] + b with a = C (q~ . scale) (2N values) and b = q~ . offset, q~ the
// query's compressed dims over sqrt(d). One workgroup per query head writes a and b; a is laid
// out [N][num_q_heads][2] (cos, sin halves), one sequence per query head's half, so that one
// segment_spectrum call over a single row of 2 num_q_heads dims transforms every head at once.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool Q_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Query { uint q_words[]; };              // [num_q_heads][HEAD_DIM]
layout(binding = 1) readonly buffer KeyDims { uint k_dims[]; };             // [num_kv_heads][HEAD_DIM]
layout(binding = 2) readonly buffer KeyCoefficients { float k_coefficients[]; };  // [num_kv_heads][2N][compressed]
layout(binding = 3) readonly buffer KeyAffine { float k_affine[]; };         // [num_kv_heads][2][compressed]
layout(binding = 4) writeonly buffer Out { float coefficients[]; };          // [N][num_q_heads][2], then [num_q_heads] offsets' dots

layout(push_constant) uniform Push {
  uint num_q_heads;
  uint group_size;
  uint num_states;
  uint compressed;
  float scale;  // 1 / sqrt(HEAD_DIM)
} push;

const uint WG = gl_WorkGroupSize.x;

shared float q_s[HEAD_DIM];  // q~ . scale, per compressed dim
shared float dot_s[WG];

void main() {
  const uint head = gl_WorkGroupID.x, kv_head = head / push.group_size, t = gl_LocalInvocationID.x;
  float offset_dot = 0.0;
  for (uint c = t; c < push.compressed; c += WG) {
    const float q = KVC_LOAD_ELEMENT(q_words, Q_F16, head * HEAD_DIM + k_dims[kv_head * HEAD_DIM + c]) * push.scale;
    q_s[c] = q * k_affine[2 * kv_head * push.compressed + c];
    offset_dot += q * k_affine[(2 * kv_head + 1) * push.compressed + c];
  }
  dot_s[t] = offset_dot;
  barrier();
  for (uint width = WG / 2; width > 0; width /= 2) {
    if (t < width) dot_s[t] += dot_s[t + width];
    barrier();
  }
  if (t == 0) coefficients[push.num_q_heads * 2 * push.num_states + head] = dot_s[0];
  const uint base = kv_head * 2 * push.num_states * push.compressed;
  for (uint r = t; r < 2 * push.num_states; r += WG) {
    float sum = 0.0;
    for (uint c = 0; c < push.compressed; ++c) sum += k_coefficients[base + r * push.compressed + c] * q_s[c];
    coefficients[((r / 2) * push.num_q_heads + head) * 2 + r % 2] = sum;
  }
}
