#version 450
// Spectral attention, the value sum, pass 1: workgroup (block of BLOCK_BINS stored bins, kv
// head of a query) sums w_b Re(S_V[b] conj(P[k_b])) over its block for every query head of the
// kv head's group, P the forward transform of the segment's probabilities. First its threads
// form each (head, bin)'s w_b P[k_b] once, in shared memory; then thread (dim pair, bin lane)
// takes every BIN_LANES-th bin of the block, reading each value state once for the group (all
// before the sums, held in registers), and the bin lanes' sums meet in shared memory. Rows 2s
// and 2s + 1 share transformed sequence s (Z = P_2s + i P_2s+1 for real probabilities),
// separated at the bin as (Z[k] + conj Z[M-k]) / 2 and (Z[k] - conj Z[M-k]) / 2i. The forward transform is a chirp-z transform to the span of
// the bins and their mirrors (ops/chirp_z_vulkan.h): Z[k] is the sequence's point
// j = k - span_first (mod M) times the span's chirp at j. With FOLD, the window's pending token
// first enters every state, as in spectral_bin_products.comp, and the state is written back.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "bin_span.glsl"
#include "complex.glsl"
#include "elements.glsl"
#include "modular.glsl"

layout(local_size_x_id = 0) in;  // at least HEAD_DIM / 2
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint BLOCK_BINS = 32;  // at most 8 * BIN_LANES
layout(constant_id = 3) const bool V_F16 = false;
layout(constant_id = 4) const bool FOLD = false;

layout(binding = 0) buffer ValueStates { vec4 value_states[]; };      // [num_kv_heads][num_bins][HEAD_DIM / 2] dim pairs
layout(binding = 1) readonly buffer Bins { uint bins[]; };
layout(binding = 2) readonly buffer Spectra { vec2 spectra[]; };      // [(rows + 1) / 2][padded_length]
layout(binding = 3) writeonly buffer Partials { vec2 partials[]; };   // [rows][num_blocks][HEAD_DIM / 2]
layout(binding = 4) readonly buffer SpanChirp { vec2 span_chirp[]; };  // [span]
layout(binding = 5) readonly buffer Values { uint v_words[]; };        // [num_kv_heads][slot_stride][HEAD_DIM]

layout(push_constant) uniform Push {
  uint num_bins;
  uint segment_length;
  uint num_q_heads;
  uint group;
  uint num_blocks;
  uint padded_length;
  uint span_first;
  uint slot_stride;
  uint pending_slot;
  uint folded_point;  // N mod M: where the pending token lands
  float folded;       // N
} push;

const uint PAIRS = HEAD_DIM / 2u;
const uint BIN_LANES = gl_WorkGroupSize.x / PAIRS;
const uint MAX_BINS_PER_LANE = 8u;  // BLOCK_BINS <= 8 * BIN_LANES
shared vec2 weighted_s[KVC_MAX_GROUP_BLOCK * BLOCK_BINS];  // [head][bin]: w_b P[k_b]
shared vec2 sums_s[KVC_MAX_GROUP_BLOCK * gl_WorkGroupSize.x];

// w_b P_row[k_b] for stored bin b.
vec2 weighted_probability(uint row, uint b) {
  const uint bin = bins[b], M = push.segment_length;
  const uint point = span_point(bin, push.span_first, M), mirror_point = span_point(bin == 0u ? 0u : M - bin, push.span_first, M);
  const uint sequence = (row / 2u) * push.padded_length;
  const vec2 z = complex_mul(spectra[sequence + point], span_chirp[point]);
  const vec2 mirror = conjugate(complex_mul(spectra[sequence + mirror_point], span_chirp[mirror_point]));
  const vec2 half_sum = 0.5 * (z + mirror), half_difference = 0.5 * (z - mirror);
  const float weight = bin == 0u || 2u * bin == M ? 1.0 : 2.0;
  return weight * (row % 2u == 0u ? half_sum : vec2(half_difference.y, -half_difference.x));
}

void main() {
  const uint kv_head = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const uint pair = t % PAIRS, bin_lane = t / PAIRS;
  const uint row_base = kv_head * push.group;
  const uint pending = (kv_head * push.slot_stride + push.pending_slot) * HEAD_DIM + 2u * pair;
  for (uint block = gl_WorkGroupID.x; block < push.num_blocks; block += gl_NumWorkGroups.x) {
    const uint first_bin = block * BLOCK_BINS, end = min(push.num_bins, first_bin + BLOCK_BINS);
    // The thread's states, all loaded before any is written back: a store between them would
    // keep the next load from issuing until it is done.
    vec4 s[MAX_BINS_PER_LANE];
    [[unroll]] for (uint i = 0u; i < MAX_BINS_PER_LANE; ++i) {
      const uint b = first_bin + bin_lane + i * BIN_LANES;
      s[i] = bin_lane < BIN_LANES && i * BIN_LANES < BLOCK_BINS && b < end ? value_states[(kv_head * push.num_bins + b) * PAIRS + pair]
                                                                            : vec4(0.0);
    }
    if (FOLD) {
      const vec2 x = vec2(KVC_LOAD_ELEMENT(v_words, V_F16, pending), KVC_LOAD_ELEMENT(v_words, V_F16, pending + 1u));
      [[unroll]] for (uint i = 0u; i < MAX_BINS_PER_LANE; ++i) {
        const uint b = first_bin + bin_lane + i * BIN_LANES;
        if (bin_lane >= BIN_LANES || i * BIN_LANES >= BLOCK_BINS || b >= end) continue;
        const float angle = -KVC_TWO_PI * float(kvc_mulmod(bins[b], push.folded_point, push.segment_length)) / float(push.segment_length);
        const vec2 twiddle = vec2(cos(angle), sin(angle));
        s[i] = (push.folded * s[i] + vec4(x.x * twiddle, x.y * twiddle)) / (push.folded + 1.0);
        value_states[(kv_head * push.num_bins + b) * PAIRS + pair] = s[i];
      }
    }
    for (uint first = 0u; first < push.group; first += KVC_MAX_GROUP_BLOCK) {
      const uint heads = min(KVC_MAX_GROUP_BLOCK, push.group - first);
      barrier();  // the previous block's shared values are read
      for (uint i = t; i < heads * BLOCK_BINS; i += gl_WorkGroupSize.x)
        if (first_bin + i % BLOCK_BINS < end)
          weighted_s[i] = weighted_probability(row_base + first + i / BLOCK_BINS, first_bin + i % BLOCK_BINS);
      barrier();
      vec2 sums[KVC_MAX_GROUP_BLOCK];
      [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g) sums[g] = vec2(0.0);
      [[unroll]] for (uint i = 0u; i < MAX_BINS_PER_LANE; ++i) {
        const uint local = bin_lane + i * BIN_LANES;
        if (bin_lane >= BIN_LANES || local >= BLOCK_BINS || first_bin + local >= end) continue;
        [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g) {
          if (g >= heads) continue;
          const vec2 p = weighted_s[g * BLOCK_BINS + local];
          sums[g] += vec2(dot(s[i].xy, p), dot(s[i].zw, p));
        }
      }
      // The bin lanes' sums meet: thread (head, pair) adds them.
      [[unroll]] for (uint g = 0u; g < KVC_MAX_GROUP_BLOCK; ++g) sums_s[g * gl_WorkGroupSize.x + t] = sums[g];
      barrier();
      for (uint item = t; item < heads * PAIRS; item += gl_WorkGroupSize.x) {
        const uint g = item / PAIRS, item_pair = item % PAIRS;
        vec2 total = vec2(0.0);
        for (uint l = 0u; l < BIN_LANES; ++l) total += sums_s[g * gl_WorkGroupSize.x + l * PAIRS + item_pair];
        partials[((row_base + first + g) * push.num_blocks + block) * PAIRS + item_pair] = total;
      }
    }
  }
}
