#version 450
// Spectral attention, the softmax, split like flash-decoding so that a long segment spreads
// over many workgroups: workgroup (chunk, pair) takes CHUNK of the segment's logits of query
// rows 2 pair and 2 pair + 1, and every chunks-th held slot from slot chunk (the held slots are
// few, sinks and the recent window; in one workgroup their serial loops were the passes' tail).
// STATISTICS: first forms its held slots' logits (excluded_slot and tokens newer than the
// query get none), then writes each row's chunk maximum and sum of exp(logit - max), both in one
// sweep (a running maximum). Otherwise: merges each row's chunk statistics (the workgroup
// together), writes the chunk's probabilities back over the spectra, and its held slots' share
// of the output (spectral_output adds the chunks'). The two rows share a sequence, a
// chirp-z transform (ops/chirp_z_vulkan.h) in both directions: their logits are conj(c[n] y[n]) (spectral_expand: the inverse
// transform as the conjugate of a forward one), component 0 row 2 pair's and component 1 the
// other's, and their probabilities p go back as (p_0 + i p_1) c[n], points M .. P - 1 zero, for
// the forward transform: that complex product is why a workgroup takes both rows. An odd last
// row pairs with zero probabilities.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "complex.glsl"
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const bool STATISTICS = false;
layout(constant_id = 4) const uint CHUNK = 4096;  // segment logits per workgroup

layout(binding = 0) buffer HeldLogits { float held_logits[]; };        // [rows][num_slots]
layout(binding = 1) readonly buffer Values { uint v_words[]; };
layout(binding = 2) buffer Spectra { vec2 spectra[]; };                  // [(rows + 1) / 2][padded_length]
layout(binding = 3) writeonly buffer HeldOutput { float held_out[]; };  // [rows][chunks][HEAD_DIM]
layout(binding = 4) buffer Statistics { vec2 statistics[]; };           // [rows][chunks]: (max, sum)
layout(binding = 5) readonly buffer Chirp { vec2 chirp[]; };            // [segment_length]
layout(binding = 6) readonly buffer Queries { uint q_words[]; };        // [num_queries][num_q_heads][HEAD_DIM]
layout(binding = 7) readonly buffer Keys { uint k_words[]; };
layout(binding = 8) readonly buffer Positions { int positions[]; };

layout(push_constant) uniform Push {
  uint segment_length;
  uint padded_length;
  uint num_slots;
  uint slot_stride;
  uint num_q_heads;
  uint group;
  uint rows;
  float scale;
  uint first_query;
  int query_position;  // first_query's
  uint excluded_slot;
} push;

shared vec2 reduction[gl_WorkGroupSize.x];  // a subgroup's entry each (subgroups may be one lane wide)

// Every thread's `value` reduced over the workgroup, in every thread: each subgroup's, then one
// pass over them (two barriers, where a tree over 256 threads took ten).
vec2 workgroup_reduce(vec2 value, bool take_max) {
  value = take_max ? subgroupMax(value) : subgroupAdd(value);
  if (subgroupElect()) reduction[gl_SubgroupID] = value;
  barrier();
  vec2 result = reduction[0];
  for (uint s = 1u; s < gl_NumSubgroups; ++s) result = take_max ? max(result, reduction[s]) : result + reduction[s];
  barrier();
  return result;
}

void main() {
  const uint chunk = gl_WorkGroupID.x, chunks = gl_NumWorkGroups.x, pair = gl_WorkGroupID.y;
  const uint row = 2u * pair;
  const bool second = row + 1u < push.rows;  // an odd last row has no partner
  const uint base = pair * push.padded_length;
  const uint first = chunk * CHUNK, last = min(first + CHUNK, push.segment_length);
  // The held slots spread over the chunks: chunk c takes slots c, c + chunks, ...
  const uint held_slots = push.num_slots > chunk ? (push.num_slots - chunk + chunks - 1u) / chunks : 0u;

  if (STATISTICS) {
    // Each thread's running (maximum, sum of exp(logit - maximum)) per row; a masked held
    // slot adds nothing.
    vec2 local_max = vec2(KVC_NEG_INF), local_sum = vec2(0.0);
    for (uint item = gl_LocalInvocationID.x; item < 2u * held_slots; item += gl_WorkGroupSize.x) {
      const uint r = row + item / held_slots, slot = chunk + chunks * (item % held_slots);
      if (r >= push.rows) continue;
      const uint cell = (r % push.num_q_heads / push.group) * push.slot_stride + slot;
      float logit = KVC_NEG_INF;
      if (slot != push.excluded_slot && positions[cell] <= push.query_position) {
        const uint q_row = push.first_query * push.num_q_heads + r % push.num_q_heads;
        float sum = 0.0;
        for (uint d = 0u; d < HEAD_DIM; d += 4u)
          sum += dot(KVC_LOAD_VEC4(q_words, KV_F16, q_row * HEAD_DIM + d), KVC_LOAD_VEC4(k_words, KV_F16, cell * HEAD_DIM + d));
        logit = sum * push.scale;
      }
      held_logits[r * push.num_slots + slot] = logit;
      if (logit == KVC_NEG_INF) continue;
      const uint c = item / held_slots;
      if (logit > local_max[c]) {
        local_sum[c] = local_sum[c] * exp(local_max[c] - logit) + 1.0;
        local_max[c] = logit;
      } else {
        local_sum[c] += exp(logit - local_max[c]);
      }
    }
    for (uint n = first + gl_LocalInvocationID.x; n < last; n += gl_WorkGroupSize.x) {
      const vec2 logits = conjugate(complex_mul(chirp[n], spectra[base + n])) * push.scale;
      const vec2 next_max = max(local_max, logits);
      local_sum = local_sum * exp(local_max - next_max) + exp(logits - next_max);
      local_max = next_max;
    }
    const vec2 chunk_max = workgroup_reduce(local_max, true);
    const vec2 chunk_sum = workgroup_reduce(local_sum * exp(local_max - chunk_max), false);
    if (gl_LocalInvocationID.x == 0u) {
      statistics[row * chunks + chunk] = vec2(chunk_max.x, chunk_sum.x);
      if (second) statistics[(row + 1u) * chunks + chunk] = vec2(chunk_max.y, chunk_sum.y);
    }
    return;
  }

  // The workgroup merges the rows' chunk statistics, each thread a stride of them. The missing
  // partner of an odd last row gets probabilities 0.
  vec2 merged_max = vec2(KVC_NEG_INF), merged_sum = vec2(0.0);
  for (uint c = gl_LocalInvocationID.x; c < chunks; c += gl_WorkGroupSize.x) {
    const vec2 stats_0 = statistics[row * chunks + c], stats_1 = second ? statistics[(row + 1u) * chunks + c] : vec2(0.0, 1.0);
    const vec2 chunk_max = vec2(stats_0.x, stats_1.x), next_max = max(merged_max, chunk_max);
    merged_sum = merged_sum * exp(merged_max - next_max) + vec2(stats_0.y, stats_1.y) * exp(chunk_max - next_max);
    merged_max = next_max;
  }
  const vec2 row_max = workgroup_reduce(merged_max, true);
  const vec2 total = workgroup_reduce(merged_sum * exp(merged_max - row_max), false);
  const vec2 inverse_total = vec2(1.0 / total.x, second ? 1.0 / total.y : 0.0);
  // Thread (row, dim) forms the chunk's held slots' share of the output.
  for (uint item = gl_LocalInvocationID.x; item < 2u * HEAD_DIM; item += gl_WorkGroupSize.x) {
    const uint r = row + item / HEAD_DIM, d = item % HEAD_DIM;
    if (r >= push.rows) continue;
    const uint kv_head = (r % push.num_q_heads) / push.group, r_base = r * push.num_slots;
    const float r_max = r == row ? row_max.x : row_max.y;
    float held = 0.0;
    for (uint j = 0; j < held_slots; ++j) {
      const uint slot = chunk + chunks * j;
      held += exp(held_logits[r_base + slot] - r_max) * KVC_LOAD_ELEMENT(v_words, KV_F16, (kv_head * push.slot_stride + slot) * HEAD_DIM + d);
    }
    held_out[(r * chunks + chunk) * HEAD_DIM + d] = held * (r == row ? inverse_total.x : inverse_total.y);
  }
  for (uint n = first + gl_LocalInvocationID.x; n < last; n += gl_WorkGroupSize.x) {
    const vec2 logits = conjugate(complex_mul(chirp[n], spectra[base + n])) * push.scale;
    vec2 probabilities = exp(logits - row_max) * inverse_total;
    if (!second) probabilities.y = 0.0;
    spectra[base + n] = complex_mul(probabilities, chirp[n]);
  }
  for (uint t = push.segment_length + chunk * gl_WorkGroupSize.x + gl_LocalInvocationID.x; t < push.padded_length; t += chunks * gl_WorkGroupSize.x)
    spectra[base + t] = vec2(0.0);
}
