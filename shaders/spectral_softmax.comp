#version 450
// Spectral attention, pass 3: one workgroup per query row. The segment's logits are the real
// parts of the inverse-transformed spectra; the held slots' logits are computed here (they
// are few: sinks and the recent window). Writes the segment's probabilities back over the
// spectra (as complex numbers with zero imaginary part, for the forward transform) and the
// held slots' share of the output.
#extension GL_GOOGLE_include_directive : require
#include "elements.glsl"

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;

layout(binding = 0) readonly buffer Queries { uint q_words[]; };
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Values { uint v_words[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) buffer Spectra { vec2 spectra[]; };               // [rows][segment_length]
layout(binding = 5) writeonly buffer HeldOutput { float held_out[]; };  // [rows][HEAD_DIM]

layout(push_constant) uniform Push {
  uint segment_length;
  uint num_slots;
  uint slot_stride;
  uint num_q_heads;
  uint group;
  int first_query_position;
  float scale;
} push;

shared float reduction[gl_WorkGroupSize.x];

float workgroup_sum(float value) {
  reduction[gl_LocalInvocationID.x] = value;
  barrier();
  for (uint stride = gl_WorkGroupSize.x / 2u; stride > 0u; stride /= 2u) {
    if (gl_LocalInvocationID.x < stride) reduction[gl_LocalInvocationID.x] += reduction[gl_LocalInvocationID.x + stride];
    barrier();
  }
  const float total = reduction[0];
  barrier();
  return total;
}

float workgroup_max(float value) {
  reduction[gl_LocalInvocationID.x] = value;
  barrier();
  for (uint stride = gl_WorkGroupSize.x / 2u; stride > 0u; stride /= 2u) {
    if (gl_LocalInvocationID.x < stride)
      reduction[gl_LocalInvocationID.x] = max(reduction[gl_LocalInvocationID.x], reduction[gl_LocalInvocationID.x + stride]);
    barrier();
  }
  const float total = reduction[0];
  barrier();
  return total;
}

// The logit of held slot `slot` for this row (every thread gets it), or KVC_NEG_INF when the
// slot holds a token newer than the query.
float held_logit(uint row, uint kv_head, uint slot) {
  const uint cell = kv_head * push.slot_stride + slot;
  const int query_position = push.first_query_position + int(row / push.num_q_heads);
  float partial = 0.0;
  for (uint d = gl_LocalInvocationID.x; d < HEAD_DIM; d += gl_WorkGroupSize.x)
    partial += KVC_LOAD_ELEMENT(q_words, KV_F16, row * HEAD_DIM + d) * KVC_LOAD_ELEMENT(k_words, KV_F16, cell * HEAD_DIM + d);
  const float logit = workgroup_sum(partial) * push.scale;
  return positions[cell] <= query_position ? logit : KVC_NEG_INF;
}

void main() {
  const uint row = gl_WorkGroupID.x;
  const uint kv_head = (row % push.num_q_heads) / push.group;
  const uint base = row * push.segment_length;

  float local_max = KVC_NEG_INF;
  for (uint n = gl_LocalInvocationID.x; n < push.segment_length; n += gl_WorkGroupSize.x)
    local_max = max(local_max, spectra[base + n].x * push.scale);
  float row_max = workgroup_max(local_max);
  for (uint slot = 0; slot < push.num_slots; ++slot) row_max = max(row_max, held_logit(row, kv_head, slot));

  float local_sum = 0.0;
  for (uint n = gl_LocalInvocationID.x; n < push.segment_length; n += gl_WorkGroupSize.x)
    local_sum += exp(spectra[base + n].x * push.scale - row_max);
  float total = workgroup_sum(local_sum);
  // The held slots' weights, unnormalised, accumulated per output dim as they come.
  float held[(256 + 31) / 32];  // HEAD_DIM <= 256 over at least 32 threads
  for (uint e = 0; e < held.length(); ++e) held[e] = 0.0;
  for (uint slot = 0; slot < push.num_slots; ++slot) {
    const float weight = exp(held_logit(row, kv_head, slot) - row_max);
    total += weight;
    const uint cell = kv_head * push.slot_stride + slot;
    for (uint d = gl_LocalInvocationID.x, e = 0; d < HEAD_DIM; d += gl_WorkGroupSize.x, ++e)
      held[e] += weight * KVC_LOAD_ELEMENT(v_words, KV_F16, cell * HEAD_DIM + d);
  }
  const float inverse_total = 1.0 / total;
  for (uint d = gl_LocalInvocationID.x, e = 0; d < HEAD_DIM; d += gl_WorkGroupSize.x, ++e)
    held_out[row * HEAD_DIM + d] = held[e] * inverse_total;
  for (uint n = gl_LocalInvocationID.x; n < push.segment_length; n += gl_WorkGroupSize.x)
    spectra[base + n] = vec2(exp(spectra[base + n].x * push.scale - row_max) * inverse_total, 0.0);
}
