#version 450
// FourierAttention decode, factorized route, step 3 (ops/fourier_attention.h): one workgroup
// per query head turns its logits into probabilities in place, and writes the middle's as
// (p, 0) pairs, the real sequence whose DFT at bins n < N gives F p.
layout(local_size_x_id = 0) in;  // a power of two

layout(binding = 0) buffer Logits { float logits[]; };                    // [num_q_heads][total]
layout(binding = 1) writeonly buffer Probabilities { vec2 middle_p[]; };  // [num_middle][num_q_heads]

layout(push_constant) uniform Push {
  uint num_full_slots;
  uint num_middle;
  uint num_q_heads;
} push;

const uint WG = gl_WorkGroupSize.x;
shared float reduce_s[WG];

float workgroup_reduce(float value, bool take_max) {
  const uint t = gl_LocalInvocationID.x;
  reduce_s[t] = value;
  barrier();
  for (uint width = WG / 2; width > 0; width /= 2) {
    if (t < width) reduce_s[t] = take_max ? max(reduce_s[t], reduce_s[t + width]) : reduce_s[t] + reduce_s[t + width];
    barrier();
  }
  const float result = reduce_s[0];
  barrier();
  return result;
}

void main() {
  const uint head = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint total = push.num_full_slots + push.num_middle, base = head * total;
  float local_max = -3.402823466e+38;
  for (uint j = t; j < total; j += WG) local_max = max(local_max, logits[base + j]);
  const float m = workgroup_reduce(local_max, true);
  float local_sum = 0.0;
  for (uint j = t; j < total; j += WG) local_sum += exp(logits[base + j] - m);
  const float inv_sum = 1.0 / workgroup_reduce(local_sum, false);
  for (uint j = t; j < total; j += WG) {
    const float p = exp(logits[base + j] - m) * inv_sum;
    logits[base + j] = p;
    if (j >= push.num_full_slots) middle_p[(j - push.num_full_slots) * push.num_q_heads + head] = vec2(p, 0.0);
  }
}
