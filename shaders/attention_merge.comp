#version 450
// Flash-decoding, pass 2: combines the splits' partials of one query head into the output and
// its log-sum-exp (read by attention_scores). One workgroup per query head, parallel over the
// splits: a serial loop over them per thread was latency-bound (tens of microseconds).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Partials { float partials[]; };  // [head][split][m, l, acc...]
layout(binding = 1) writeonly buffer Out { uint out_words[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };

layout(push_constant) uniform Push { uint num_splits; } push;

const uint WG = gl_WorkGroupSize.x;
const uint CHUNKS = HEAD_DIM / 4;
const uint SPLIT_LANES = WG / CHUNKS;  // threads summing the same 4 dims over different splits
const uint STRIDE = HEAD_DIM + 2;

shared float reduce_s[WG];
shared vec4 acc_s[WG];

// The sum (or max) of every thread's `value`; all threads get it.
float workgroup_reduce(float value, bool take_max) {
  reduce_s[gl_LocalInvocationID.x] = value;
  barrier();
  for (uint width = WG / 2; width > 0; width /= 2) {
    if (gl_LocalInvocationID.x < width) {
      const float other = reduce_s[gl_LocalInvocationID.x + width];
      const float mine = reduce_s[gl_LocalInvocationID.x];
      reduce_s[gl_LocalInvocationID.x] = take_max ? max(mine, other) : mine + other;
    }
    barrier();
  }
  const float result = reduce_s[0];
  barrier();
  return result;
}

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint t = gl_LocalInvocationID.x;
  const uint first = head * push.num_splits * STRIDE;

  float m_local = KVC_NEG_INF;
  for (uint s = t; s < push.num_splits; s += WG) m_local = max(m_local, partials[first + s * STRIDE]);
  const float m_all = workgroup_reduce(m_local, true);
  float l_local = 0.0;
  for (uint s = t; s < push.num_splits; s += WG)
    l_local += partials[first + s * STRIDE + 1] * exp(partials[first + s * STRIDE] - m_all);
  const float l_all = workgroup_reduce(l_local, false);

  const uint chunk = t % CHUNKS, split_lane = t / CHUNKS;
  vec4 acc = vec4(0);
  if (split_lane < SPLIT_LANES) {
    for (uint s = split_lane; s < push.num_splits; s += SPLIT_LANES) {
      const uint base = first + s * STRIDE;
      const uint e = base + 2 + chunk * 4;
      acc += exp(partials[base] - m_all) * vec4(partials[e], partials[e + 1], partials[e + 2], partials[e + 3]);
    }
  }
  acc_s[t] = acc;
  barrier();
  if (split_lane == 0) {
    vec4 o = vec4(0);
    for (uint lane = 0; lane < SPLIT_LANES; ++lane) o += acc_s[lane * CHUNKS + chunk];
    o /= l_all;
    const uint e = head * HEAD_DIM + chunk * 4;
    if (OUT_F16) {
      out_words[e / 2] = packHalf2x16(o.xy);
      out_words[e / 2 + 1] = packHalf2x16(o.zw);
    } else {
      out_words[e] = floatBitsToUint(o.x);
      out_words[e + 1] = floatBitsToUint(o.y);
      out_words[e + 2] = floatBitsToUint(o.z);
      out_words[e + 3] = floatBitsToUint(o.w);
    }
  }
  if (t == 0) lse[head] = m_all + log(l_all);
}
