#version 450
// Spectral attention, the softmax, split like flash-decoding so that a long segment spreads
// over many workgroups: workgroup (chunk, row) takes CHUNK of the segment's logits (chunk 0
// also the held slots'). STATISTICS: writes its chunk's maximum and sum of exp(logit - max).
// Otherwise: merges its row's chunk statistics, writes its chunk's probabilities back over
// the spectra, and chunk
// 0 writes the held slots' share of the output. Row r's segment logits are component r % 2 of
// the inverse-transformed sequence r / 2 (spectral_expand packs two rows per transform), and
// its probabilities go back to the same component, so that the forward transform takes two
// rows too; the held slots' logits come from spectral_held_logits.
#extension GL_GOOGLE_include_directive : require
#include "elements.glsl"

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const bool STATISTICS = false;
layout(constant_id = 4) const uint CHUNK = 4096;  // segment logits per workgroup

layout(binding = 0) readonly buffer HeldLogits { float held_logits[]; };  // [rows][num_slots]
layout(binding = 1) readonly buffer Values { uint v_words[]; };
layout(binding = 2) buffer Spectra { float spectra[]; };                 // [(rows + 1) / 2][segment_length][2]
layout(binding = 3) writeonly buffer HeldOutput { float held_out[]; };  // [rows][HEAD_DIM]
layout(binding = 4) buffer Statistics { vec2 statistics[]; };           // [rows][chunks]: (max, sum)

layout(push_constant) uniform Push {
  uint segment_length;
  uint num_slots;
  uint slot_stride;
  uint num_q_heads;
  uint group;
  float scale;
} push;

shared float reduction[gl_WorkGroupSize.x];

float workgroup_reduce(float value, bool take_max) {
  reduction[gl_LocalInvocationID.x] = value;
  barrier();
  for (uint stride = gl_WorkGroupSize.x / 2u; stride > 0u; stride /= 2u) {
    if (gl_LocalInvocationID.x < stride) {
      const float other = reduction[gl_LocalInvocationID.x + stride];
      reduction[gl_LocalInvocationID.x] = take_max ? max(reduction[gl_LocalInvocationID.x], other) : reduction[gl_LocalInvocationID.x] + other;
    }
    barrier();
  }
  const float result = reduction[0];
  barrier();
  return result;
}

void main() {
  const uint chunk = gl_WorkGroupID.x, chunks = gl_NumWorkGroups.x, row = gl_WorkGroupID.y;
  const uint kv_head = (row % push.num_q_heads) / push.group;
  // Logit n of the row is spectra[base + 2 n]; the other row of the pair writes the other floats.
  const uint base = 2u * (row / 2u) * push.segment_length + row % 2u, held_base = row * push.num_slots;
  const uint first = chunk * CHUNK, last = min(first + CHUNK, push.segment_length);
  const uint held_slots = chunk == 0u ? push.num_slots : 0u;

  if (STATISTICS) {
    float local_max = KVC_NEG_INF;
    for (uint n = first + gl_LocalInvocationID.x; n < last; n += gl_WorkGroupSize.x)
      local_max = max(local_max, spectra[base + 2u * n] * push.scale);
    for (uint slot = gl_LocalInvocationID.x; slot < held_slots; slot += gl_WorkGroupSize.x)
      local_max = max(local_max, held_logits[held_base + slot]);
    const float chunk_max = workgroup_reduce(local_max, true);
    float local_sum = 0.0;
    for (uint n = first + gl_LocalInvocationID.x; n < last; n += gl_WorkGroupSize.x)
      local_sum += exp(spectra[base + 2u * n] * push.scale - chunk_max);
    for (uint slot = gl_LocalInvocationID.x; slot < held_slots; slot += gl_WorkGroupSize.x)
      local_sum += exp(held_logits[held_base + slot] - chunk_max);
    const float chunk_sum = workgroup_reduce(local_sum, false);
    if (gl_LocalInvocationID.x == 0u) statistics[row * chunks + chunk] = vec2(chunk_max, chunk_sum);
    return;
  }

  // Every thread merges the row's few chunk statistics itself: no barrier needed.
  float row_max = KVC_NEG_INF;
  for (uint c = 0u; c < chunks; ++c) row_max = max(row_max, statistics[row * chunks + c].x);
  float total = 0.0;
  for (uint c = 0u; c < chunks; ++c) {
    const vec2 stats = statistics[row * chunks + c];
    total += stats.y * exp(stats.x - row_max);
  }
  const float inverse_total = 1.0 / total;
  for (uint d = gl_LocalInvocationID.x; d < HEAD_DIM && chunk == 0u; d += gl_WorkGroupSize.x) {
    float held = 0.0;
    for (uint slot = 0; slot < held_slots; ++slot)
      held += exp(held_logits[held_base + slot] - row_max) * KVC_LOAD_ELEMENT(v_words, KV_F16, (kv_head * push.slot_stride + slot) * HEAD_DIM + d);
    held_out[row * HEAD_DIM + d] = held * inverse_total;
  }
  for (uint n = first + gl_LocalInvocationID.x; n < last; n += gl_WorkGroupSize.x)
    spectra[base + 2u * n] = exp(spectra[base + 2u * n] * push.scale - row_max) * inverse_total;
}
