#version 450
// FourierAttention decode, factorized route, steps 4 and 5 where T = R B with B a power of two
// >= 2N (ops/fourier_attention.h): the middle's weights w = exp(logit - M) (M the query head's
// largest middle logit) and their DFT at the bins fourier_value_partials reads, k in (-N, N).
// For t = r + R j (r < R, j < B),
//   (F w)[k] = sum_r e^(-2 pi i k r / T) sum_j w[r + R j] e^(-2 pi i k j / B):
// a B-point DFT per residue r in shared memory, then the twiddled sum over the workgroup's
// residues. Each workgroup writes its block's share of the 2N - 1 bins; fourier_value_partials
// adds the blocks'. Two query heads a sequence, as (w_{2s}, w_{2s+1}). Workgroup (block of RUNS
// residues, pair); block 0 also writes M, the reference of fourier_value_partials' partials.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // max(32, POINTS / 4): a radix-4 butterfly a thread a stage
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint LENGTH_LOG2 = 10;  // B = 2^LENGTH_LOG2
layout(constant_id = 3) const uint RUNS = 4;          // residues a workgroup

#include "elements.glsl"

layout(binding = 0) readonly buffer Partials { float partials[]; };  // [num_q_heads][num_splits][HEAD_DIM + 2]
layout(binding = 1) readonly buffer Logits { vec2 logits[]; };       // [pairs][T]: the middle's logits
layout(binding = 2) writeonly buffer HeadTerms { float head_terms[]; };  // M at [num_q_heads + head]
layout(binding = 3) writeonly buffer Bins { vec2 bins[]; };          // [pairs][blocks][2N], bin k at k mod 2N (bin N unwritten)

layout(push_constant) uniform Push {
  uint num_q_heads;
  uint num_middle;      // L
  uint window_length;   // T
  uint first_middle_split;
  uint middle_splits;
  uint num_splits;
  uint num_states;      // N
  uint residues;        // R = T / B
} push;

const uint LENGTH = 1u << LENGTH_LOG2;
const uint POINTS = RUNS * LENGTH;
shared vec2 fft_s[POINTS];
shared vec2 fft_twiddle_s[LENGTH];

#include "middle_max.glsl"
#include "shared_fft.glsl"

void main() {
  const uint pair = gl_WorkGroupID.y, block = gl_WorkGroupID.x, first_residue = block * RUNS, t = gl_LocalInvocationID.x;
  const uint N = push.num_states, T = push.window_length, R = push.residues;
  const bool has_odd = 2 * pair + 1 < push.num_q_heads;
  const vec2 middle_max = pair_middle_max(pair, has_odd);
  if (block == 0 && t == 0) {
    head_terms[push.num_q_heads + 2 * pair] = middle_max.x;
    if (has_odd) head_terms[push.num_q_heads + 2 * pair + 1] = middle_max.y;
  }

  // RUNS consecutive points for each j.
  for (uint i = t; i < POINTS; i += gl_WorkGroupSize.x) {
    const uint run = i % RUNS, j = i / RUNS, r = first_residue + run, point = r + R * j;
    vec2 weight = vec2(0.0);
    if (r < R && point < push.num_middle) {
      const vec2 logit = logits[pair * T + point];
      weight = vec2(exp(logit.x - middle_max.x), has_odd ? exp(logit.y - middle_max.y) : 0.0);
    }
    fft_s[run * LENGTH + j] = weight;
  }
  shared_fft(POINTS, LENGTH_LOG2, false, false);

  // Decimation in frequency left bin k mod B at fft_position(k mod B): a thread a place, so that
  // a warp reads consecutive places, for the places that hold a bin k in (-N, N) (at k mod 2N).
  for (uint place = t; place < LENGTH; place += gl_WorkGroupSize.x) {
    const uint bin = fft_position(place, LENGTH_LOG2);
    const bool positive = bin < N;
    if (!positive && bin <= LENGTH - N) continue;
    const uint magnitude = positive ? bin : LENGTH - bin;
    vec2 sum = vec2(0.0);
    for (uint run = 0; run < RUNS && first_residue + run < R; ++run) {
      const uint turn = magnitude * (first_residue + run);  // |k| r < N R <= T / 2
      sum += complex_mul(fft_s[run * LENGTH + place], kvc_turn_cos_sin(positive && turn != 0 ? T - turn : turn, T));
    }
    bins[(pair * gl_NumWorkGroups.x + block) * 2 * N + (positive ? bin : 2 * N - magnitude)] = sum;
  }
}
