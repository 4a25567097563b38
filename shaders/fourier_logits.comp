#version 450
// FourierAttention decode, factorized route, step 2 (ops/fourier_attention.h): the logit of
// every token for every query head of kv head gl_WorkGroupID.y, one token per thread: a full
// row's q . k / sqrt(d); a middle token's uncompressed dims' dot with its packed row plus the
// compressed dims' (F^T a)[t] + b, read from F^T a's spectrum (Re X_a[t] - Im X_b[t], the
// DFT of a's cos and sin halves at bin t) and b.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GROUP = 4;  // query heads per kv head
layout(constant_id = 3) const bool KV_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Query { uint q_words[]; };
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer KeyMiddle { uint k_middle[]; };
layout(binding = 3) readonly buffer KeyDims { uint k_dims[]; };
layout(binding = 4) readonly buffer KeySpectrum { vec4 key_spectrum[]; };  // [num_middle][num_q_heads]: (re, im) of a_cos, a_sin
layout(binding = 5) readonly buffer Coefficients { float coefficients[]; };  // offsets' dots at [num_q_heads * 2N + head]
layout(binding = 6) writeonly buffer Logits { float logits[]; };            // [num_q_heads][num_full_slots + num_middle]

layout(push_constant) uniform Push {
  uint num_full_slots;
  uint slot_stride;
  uint num_middle;
  uint middle_stride;
  uint num_q_heads;
  uint num_states;
  uint compressed;
  float scale;
} push;

shared float q_s[GROUP * HEAD_DIM];

void main() {
  const uint kv_head = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const uint head0 = kv_head * GROUP;
  for (uint e = t; e < GROUP * HEAD_DIM; e += gl_WorkGroupSize.x)
    q_s[e] = KVC_LOAD_ELEMENT(q_words, KV_F16, head0 * HEAD_DIM + e) * push.scale;
  barrier();
  const uint total = push.num_full_slots + push.num_middle;
  const uint j = gl_WorkGroupID.x * gl_WorkGroupSize.x + t;
  if (j >= total) return;
  float dots[GROUP];
  for (uint g = 0; g < GROUP; ++g) dots[g] = 0.0;
  if (j < push.num_full_slots) {
    const uint row = (kv_head * push.slot_stride + j) * HEAD_DIM;
    for (uint d = 0; d < HEAD_DIM; ++d) {
      const float k = KVC_LOAD_ELEMENT(k_words, KV_F16, row + d);
      for (uint g = 0; g < GROUP; ++g) dots[g] += q_s[g * HEAD_DIM + d] * k;
    }
  } else {
    const uint m = j - push.num_full_slots, kept = HEAD_DIM - push.compressed;
    const uint row = (kv_head * push.middle_stride + m) * kept;
    for (uint u = 0; u < kept; ++u) {
      const float k = KVC_LOAD_ELEMENT(k_middle, KV_F16, row + u);
      const uint d = k_dims[kv_head * HEAD_DIM + push.compressed + u];
      for (uint g = 0; g < GROUP; ++g) dots[g] += q_s[g * HEAD_DIM + d] * k;
    }
    for (uint g = 0; g < GROUP; ++g) {
      const vec4 spectrum = key_spectrum[m * push.num_q_heads + head0 + g];
      dots[g] += spectrum.x - spectrum.w + coefficients[push.num_q_heads * 2 * push.num_states + head0 + g];
    }
  }
  for (uint g = 0; g < GROUP; ++g) logits[(head0 + g) * total + j] = dots[g];
}
