#version 450
// Spectral attention, the value sum, pass 1: item (kv head of a query, block of stored bins,
// dim pair) sums w_b Re(S_V[b] conj(P[k_b])) over its block for every query head of the kv
// head's group, P the forward transform of the segment's probabilities, reading each value
// state once for the group. Rows 2s and 2s + 1 share transformed sequence s (Z = P_2s +
// i P_2s+1 for real probabilities), separated at the bin as (Z[k] + conj Z[M-k]) / 2 and
// (Z[k] - conj Z[M-k]) / 2i. Blocks of bins spread the sum over the GPU: a row's dims alone
// are too few threads to hide the loads' latency over thousands of bins. The forward
// transform is a chirp-z transform to the span of the bins and their mirrors
// (ops/chirp_z_vulkan.h): Z[k] is the sequence's point j = k - span_first (mod M) times the
// span's chirp at j.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "bin_span.glsl"
#include "complex.glsl"
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint BINS_PER_BLOCK = 64;

layout(binding = 0) readonly buffer ValueStates { vec2 value_states[]; };  // [num_kv_heads][num_bins][HEAD_DIM]
layout(binding = 1) readonly buffer Bins { uint bins[]; };
layout(binding = 2) readonly buffer Spectra { vec2 spectra[]; };           // [(rows + 1) / 2][padded_length]
layout(binding = 3) writeonly buffer Partials { vec2 partials[]; };         // [rows][num_blocks][HEAD_DIM / 2]
layout(binding = 4) readonly buffer SpanChirp { vec2 span_chirp[]; };      // [span]

layout(push_constant) uniform Push {
  uint num_bins;
  uint segment_length;
  uint rows;
  uint num_q_heads;
  uint group;
  uint num_blocks;
  uint padded_length;
  uint span_first;
} push;

// points: the bin's and its mirror's in the span; chirps: the span's chirps there.
vec2 row_spectrum(uint row, uvec2 points, vec4 chirps) {
  const uint sequence = (row / 2u) * push.padded_length;
  const vec2 z = complex_mul(spectra[sequence + points.x], chirps.xy);
  const vec2 mirror = conjugate(complex_mul(spectra[sequence + points.y], chirps.zw));
  const vec2 half_sum = 0.5 * (z + mirror), half_difference = 0.5 * (z - mirror);
  return row % 2u == 0u ? half_sum : vec2(half_difference.y, -half_difference.x);
}

void main() {
  const uint pairs = HEAD_DIM / 2u;
  const uint num_kv_heads = push.num_q_heads / push.group;
  const uint items = (push.rows / push.num_q_heads) * num_kv_heads * push.num_blocks * pairs;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint pair = item % pairs;
    const uint block = (item / pairs) % push.num_blocks;
    const uint kv_row = item / (pairs * push.num_blocks);  // (query, kv head)
    const uint kv_head = kv_row % num_kv_heads;
    const uint end = min(push.num_bins, (block + 1u) * BINS_PER_BLOCK);
    // The group's query heads in blocks the registers hold, each state read once per block.
    for (uint first = 0u; first < push.group; first += KVC_MAX_GROUP_BLOCK) {
      const uint heads = min(KVC_MAX_GROUP_BLOCK, push.group - first);
      const uint row0 = kv_row * push.group + first;
      // Loops over the whole block with constant trip counts keep sums[] in registers.
      vec2 sums[KVC_MAX_GROUP_BLOCK];
      [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g) sums[g] = vec2(0.0);
      for (uint b = block * BINS_PER_BLOCK; b < end; ++b) {
        const uint bin = bins[b];
        const uvec2 points = uvec2(span_point(bin, push.span_first, push.segment_length),
                                   span_point(bin == 0u ? 0u : push.segment_length - bin, push.span_first, push.segment_length));
        const vec4 chirps = vec4(span_chirp[points.x], span_chirp[points.y]);
        const float weight = bin == 0u || 2u * bin == push.segment_length ? 1.0 : 2.0;
        const uint state = (kv_head * push.num_bins + b) * HEAD_DIM + 2u * pair;
        const vec2 state_a = value_states[state], state_b = value_states[state + 1u];
        [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g) {
          if (g >= heads) continue;
          const vec2 p = row_spectrum(row0 + g, points, chirps) * weight;
          sums[g] += vec2(dot(state_a, p), dot(state_b, p));
        }
      }
      [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g)
        if (g < heads) partials[((row0 + g) * push.num_blocks + block) * pairs + pair] = sums[g];
    }
  }
}
