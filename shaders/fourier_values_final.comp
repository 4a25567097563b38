#version 450
// FourierAttention decode, factorized route, step 5 (ops/fourier_attention.h): one workgroup
// per query head adds its chunks' partials and, for each compressed dim c of V (output dim
// v_dims[c]), sum_t p_t (scale (F^T C)[t][c] + offset) = scale (C^T F p)[c] + offset sum_t p_t,
// with F p from the DFT of the middle's probabilities (bin n: re = sum p cos, im = -sum p sin;
// bin 0's re is sum p).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // >= HEAD_DIM
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;

layout(binding = 0) readonly buffer Partials { float partials[]; };          // [num_q_heads][num_chunks][HEAD_DIM]
layout(binding = 1) readonly buffer ValueSpectrum { vec4 value_spectrum[]; };  // [N][num_q_heads]: (re, im) of (p, 0)
layout(binding = 2) readonly buffer ValueDims { uint v_dims[]; };
layout(binding = 3) readonly buffer ValueCoefficients { float v_coefficients[]; };  // [num_kv_heads][2N][compressed]
layout(binding = 4) readonly buffer ValueAffine { float v_affine[]; };              // [num_kv_heads][2][compressed]
layout(binding = 5) writeonly buffer Out { uint out_words[]; };                     // [num_q_heads][HEAD_DIM]

layout(push_constant) uniform Push {
  uint num_chunks;
  uint group_size;
  uint num_states;
  uint compressed;
  uint has_middle;
  uint num_q_heads;
} push;

shared float out_s[HEAD_DIM];

void main() {
  const uint head = gl_WorkGroupID.x, kv_head = head / push.group_size, i = gl_LocalInvocationID.x;
  if (i < HEAD_DIM) {
    float sum = 0.0;
    for (uint chunk = 0; chunk < push.num_chunks; ++chunk) sum += partials[(head * push.num_chunks + chunk) * HEAD_DIM + i];
    out_s[i] = sum;
  }
  barrier();
  if (push.has_middle != 0 && i < push.compressed) {
    const uint base = kv_head * 2 * push.num_states * push.compressed + i;
    float sum = 0.0;
    for (uint n = 0; n < push.num_states; ++n) {
      const vec4 bin = value_spectrum[n * push.num_q_heads + head];
      sum += v_coefficients[base + 2 * n * push.compressed] * bin.x - v_coefficients[base + (2 * n + 1) * push.compressed] * bin.y;
    }
    const float p_middle = value_spectrum[head].x;
    const float scale = v_affine[2 * kv_head * push.compressed + i], offset = v_affine[(2 * kv_head + 1) * push.compressed + i];
    out_s[v_dims[kv_head * HEAD_DIM + i]] += scale * sum + offset * p_middle;
  }
  barrier();
  if (OUT_F16) {
    if (2 * i < HEAD_DIM) out_words[(head * HEAD_DIM) / 2 + i] = packHalf2x16(vec2(out_s[2 * i], out_s[2 * i + 1]));
  } else if (i < HEAD_DIM) {
    out_words[head * HEAD_DIM + i] = floatBitsToUint(out_s[i]);
  }
}
