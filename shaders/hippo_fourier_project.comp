#version 450
// HiPPO-FourierT projection (ops/hippo_fourier.h): adds (1/T) F X of a segment to the
// coefficients, eq. 4 at prefill and eq. 6 for a token leaving the local window. Workgroup
// (block of BINS bins and of WG dims, head): thread j sums its dim's column against cos and sin
// of every bin of the block over the segment. The basis of the block's bins is computed once
// per workgroup, CHUNK tokens at a time (one entry per thread), into shared memory; each angle
// is reduced exactly as (n t) mod T in integers, so long windows lose no precision. Several
// bins per workgroup keep a decode step's one-token update to a few hundred workgroups, each
// reading the token's dims once.
//
// FOLD (ops/fourier_fold.h): a window token joining FourierAttention's middle, K and V in one
// dispatch. The grid's z picks the part (0: rows, dims, coefficients; 1: their second_*), and
// the threads span every dim of a head: the first num_dims (the compressed ones, dims' order)
// are projected as above, and the others pack their element of the segment's tokens (bin
// blocks taking them in turn) into the part's packed middle, dim-major, at token first_index + i
// of the dim's run, a word (two f16 tokens) per thread.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // BINS x CHUNK = 128 threads (the host's kProjectWorkgroup): one basis entry each
layout(constant_id = 1) const bool ROWS_F16 = false;
layout(constant_id = 2) const bool FOLD = false;

#include "elements.glsl"
#include "fourier_turn.glsl"
#include "modular.glsl"

layout(binding = 0) readonly buffer Rows { uint row_words[]; };        // [heads][slot_stride][head_dim]
layout(binding = 1) readonly buffer Dims { uint dims[]; };             // [heads][head_dim]
layout(binding = 2) buffer Coefficients { float coefficients[]; };     // [heads][2N][num_dims]
layout(binding = 3) readonly buffer SecondRows { uint second_row_words[]; };  // FOLD: V's, as above
layout(binding = 4) readonly buffer SecondDims { uint second_dims[]; };
layout(binding = 5) buffer SecondCoefficients { float second_coefficients[]; };
layout(binding = 6) buffer Packed { uint packed_words[]; };            // FOLD: [heads][head_dim - num_dims][packed_stride]
layout(binding = 7) buffer SecondPacked { uint second_packed_words[]; };

layout(push_constant) uniform Push {
  uint head_dim;
  uint num_states;
  uint window_length;
  uint num_dims;
  uint slot_stride;
  uint first_slot;
  uint segment_length;
  uint first_index;
  uint second_num_dims;  // FOLD
  uint packed_stride;    // FOLD: tokens per dim's run of the packed middles
} push;

const uint WG = gl_WorkGroupSize.x;
const uint BINS = 8;    // bins per workgroup (the host's kProjectBins)
const uint CHUNK = 16;  // tokens per basis pass: BINS x CHUNK entries, one per thread

shared vec2 basis_s[BINS * CHUNK];  // (cos, sin) of bin b at the chunk's token i: [b][i]

// Part `part`'s element of rows at `index`, its dims entry, its coefficient (read, write).
float row_element(uint part, uint index) {
  return part == 0u ? KVC_LOAD_ELEMENT(row_words, ROWS_F16, index) : KVC_LOAD_ELEMENT(second_row_words, ROWS_F16, index);
}
uint dim_entry(uint part, uint index) { return part == 0u ? dims[index] : second_dims[index]; }
float coefficient(uint part, uint index) { return part == 0u ? coefficients[index] : second_coefficients[index]; }
void set_coefficient(uint part, uint index, float value) {
  if (part == 0u) coefficients[index] = value;
  else second_coefficients[index] = value;
}

// Word w of part `part`'s packed middle (f16: two tokens of a dim's run).
uint packed_word(uint part, uint w) { return part == 0u ? packed_words[w] : second_packed_words[w]; }
void set_packed_word(uint part, uint w, uint bits) {
  if (part == 0u) packed_words[w] = bits;
  else second_packed_words[w] = bits;
}

void main() {
  const uint t = gl_LocalInvocationID.x, part = gl_WorkGroupID.z;
  const uint num_dims = part == 0u ? push.num_dims : push.second_num_dims;
  const uint dim_blocks = ((FOLD ? push.head_dim : num_dims) + WG - 1) / WG;
  const uint first_bin = (gl_WorkGroupID.x / dim_blocks) * BINS;
  const uint j = (gl_WorkGroupID.x % dim_blocks) * WG + t;
  const uint head = gl_WorkGroupID.y;
  const bool live = j < num_dims;
  const uint dim = j < push.head_dim ? dim_entry(part, head * push.head_dim + j) : 0u;
  const uint first_row = head * push.slot_stride + push.first_slot;
  // The block's coefficients are read first, every one before any is written (a store may
  // alias a later load, so interleaved read-modify-writes would wait for memory once per bin),
  // and before the segment's rows, so that in a decode step's fold their loads overlap the
  // chain of the dims' and the token's loads (H100, FOURIER's 32-layer decode step at 32K:
  // 3150-3154 -> 3130-3134 us of GPU time; docs/benchmarks.md, eighteenth session).
  const uint base = (head * 2 * push.num_states + 2 * first_bin) * num_dims + j;
  const uint bins = min(BINS, push.num_states - first_bin);
  vec2 previous[BINS];
  [[unroll]] for (uint b = 0; b < BINS; ++b)
    previous[b] = live && b < bins ? vec2(coefficient(part, base + 2 * b * num_dims), coefficient(part, base + (2 * b + 1) * num_dims))
                                   : vec2(0.0);
  vec2 sums[BINS];
  [[unroll]] for (uint b = 0; b < BINS; ++b) sums[b] = vec2(0.0);
  for (uint chunk = 0; chunk < push.segment_length; chunk += CHUNK) {
    barrier();  // the previous chunk's basis is read
    {
      const uint n = first_bin + t / CHUNK, i = chunk + t % CHUNK;
      basis_s[t] = n < push.num_states && i < push.segment_length
                       ? kvc_turn_cos_sin(kvc_mulmod(n, push.first_index + i, push.window_length), push.window_length)
                       : vec2(0.0);
    }
    barrier();
    if (live) {
      float x[CHUNK];
      [[unroll]] for (uint k = 0; k < CHUNK; ++k)
        x[k] = chunk + k < push.segment_length ? row_element(part, (first_row + chunk + k) * push.head_dim + dim) : 0.0;
      [[unroll]] for (uint b = 0; b < BINS; ++b)
        [[unroll]] for (uint k = 0; k < CHUNK; ++k) sums[b] += basis_s[b * CHUNK + k] * x[k];
    }
  }
  if (FOLD && !live && j < push.head_dim) {
    // Bin block b packs words b, b + bin blocks, ... of the dim's run (a long segment's packing
    // spreads over the grid; a decode step's one token is bin block 0's). In f16 a word's two
    // tokens are one thread's, so no other thread writes it: a token outside the segment keeps
    // its half, read and written back.
    const uint kept = push.head_dim - num_dims, u = j - num_dims, bin_blocks = gl_NumWorkGroups.x / dim_blocks;
    const uint per_word = ROWS_F16 ? 2u : 1u, run = (head * kept + u) * push.packed_stride;  // even in f16
    const uint end = push.first_index + push.segment_length;
    for (uint w = push.first_index / per_word + first_bin / BINS; w * per_word < end; w += bin_blocks) {
      uint bits = ROWS_F16 && (w * 2u < push.first_index || w * 2u + 1u >= end) ? packed_word(part, (run >> 1) + w) : 0u;
      for (uint e = 0; e < per_word; ++e) {
        const uint index = w * per_word + e;  // in the run
        if (index < push.first_index || index >= end) continue;
        const float value = row_element(part, (first_row + index - push.first_index) * push.head_dim + dim);
        if (!ROWS_F16) bits = floatBitsToUint(value);
        else bits = (bits & ~(0xffffu << (16u * e))) | ((packHalf2x16(vec2(value, 0.0)) & 0xffffu) << (16u * e));
      }
      set_packed_word(part, ROWS_F16 ? (run >> 1) + w : run + w, bits);
    }
  }
  if (!live) return;
  const float inv_window = 1.0 / float(push.window_length);
  [[unroll]] for (uint b = 0; b < BINS; ++b)
    if (b < bins) {
      set_coefficient(part, base + 2 * b * num_dims, previous[b].x + sums[b].x * inv_window);
      set_coefficient(part, base + (2 * b + 1) * num_dims, previous[b].y + sums[b].y * inv_window);
    }
}
