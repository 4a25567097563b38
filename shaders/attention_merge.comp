#version 450
// Flash-decoding, pass 2: combines the splits' partials of one query head into the output
// and its log-sum-exp (read by attention_scores). One workgroup per query head.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Partials { float partials[]; };
layout(binding = 1) writeonly buffer Out { uint out_words[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };

layout(push_constant) uniform Push { uint num_splits; } push;

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint stride = HEAD_DIM + 2;
  const uint first = head * push.num_splits * stride;
  float m_all = KVC_NEG_INF;
  for (uint s = 0; s < push.num_splits; ++s) m_all = max(m_all, partials[first + s * stride]);
  float l_all = 0.0;
  for (uint s = 0; s < push.num_splits; ++s)
    l_all += partials[first + s * stride + 1] * exp(partials[first + s * stride] - m_all);
  for (uint pair = gl_LocalInvocationID.x; pair < HEAD_DIM / 2; pair += gl_WorkGroupSize.x) {
    vec2 o = vec2(0);
    for (uint s = 0; s < push.num_splits; ++s) {
      const uint base = first + s * stride;
      const float w = exp(partials[base] - m_all);
      o += w * vec2(partials[base + 2 + 2 * pair], partials[base + 3 + 2 * pair]);
    }
    o /= l_all;
    const uint e = head * HEAD_DIM + 2 * pair;
    if (OUT_F16) {
      out_words[e / 2] = packHalf2x16(o);
    } else {
      out_words[e] = floatBitsToUint(o.x);
      out_words[e + 1] = floatBitsToUint(o.y);
    }
  }
  if (gl_LocalInvocationID.x == 0) lse[head] = m_all + log(l_all);
}
