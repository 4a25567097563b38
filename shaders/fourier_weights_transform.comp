#version 450
// FourierAttention decode, factorized route, steps 4 to 6 where T = R B with B a power of two
// >= 2N (ops/fourier_attention.h): the middle's weights w = exp(logit - M) (M the query head's
// largest middle logit), their DFT at the bins k in (-N, N), and the compressed dims' share of
// the values that those bins give. For t = r + R j (r < R, j < B),
//   (F w)[k] = sum_r e^(-2 pi i k r / T) sum_j w[r + R j] e^(-2 pi i k j / B):
// a B-point DFT per residue r in shared memory, then the twiddled sum over the workgroup's
// residues: the block's share of F w. Two query heads a sequence, as (w_{2s}, w_{2s+1}).
// Workgroup (block of RUNS residues, pair).
//
// F w is linear in w, so each block's share goes through C_v on its own: for query head h and
// compressed dim c of V (output dim v_dims[c]), sum_t w_t (scale[c] (F^T C_v)[t][c] + offset[c])
// = scale[c] (C_v^T F w)[c] + offset[c] sum_t w_t, over the block's tokens. Bin n of head h's
// spectrum E has re = sum w cos, im = -sum w sin (bin 0's re is sum w); the pair's sequence Z
// separates as E_{2s}[n] = (Z[n] + conj Z[-n]) / 2 and E_{2s+1}[n] = (Z[n] - conj Z[-n]) / 2i.
// Each block writes one partial per head for attention_merge: max M, sum 0
// (fourier_middle_partials counted the weights), its share at the compressed dims, 0 elsewhere.
// Forming the values here, where fourier_value_partials summed the blocks' bins in a dispatch
// of its own, takes one dependent dispatch out of a decode step's chain.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // max(32, POINTS / 4): a radix-4 butterfly a thread a stage
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint LENGTH_LOG2 = 10;  // B = 2^LENGTH_LOG2
layout(constant_id = 3) const uint RUNS = 4;          // residues a workgroup
// Threads that share a compressed dim's sum over the bins, each over every VALUE_PARTS-th bin
// (a power of two; VALUE_PARTS * HEAD_DIM <= the workgroup and, past B, within fft_s).
layout(constant_id = 4) const uint VALUE_PARTS = 1;

#include "elements.glsl"

layout(binding = 0) buffer Partials { float partials[]; };  // [num_q_heads][num_splits][HEAD_DIM + 2]: the middle's maxima in, the blocks' rows out
layout(binding = 1) readonly buffer Logits { vec2 logits[]; };                     // [pairs][T]: the middle's logits
layout(binding = 2) readonly buffer ValueDims { uint v_dims[]; };                   // [num_kv_heads][HEAD_DIM]
layout(binding = 3) readonly buffer ValueCoefficients { float v_coefficients[]; };  // [num_kv_heads][2N][compressed]
layout(binding = 4) readonly buffer ValueAffine { float v_affine[]; };              // [num_kv_heads][2][compressed]

layout(push_constant) uniform Push {
  uint num_q_heads;
  uint num_middle;      // L
  uint window_length;   // T
  uint first_middle_split;
  uint middle_splits;
  uint num_splits;
  uint num_states;      // N
  uint residues;        // R = T / B
  uint group_size;
  uint compressed;      // V's compressed dims
  uint first_value_split;  // block 0's row in a head's partials
} push;

const uint WG = gl_WorkGroupSize.x;
const uint LENGTH = 1u << LENGTH_LOG2;
const uint POINTS = RUNS * LENGTH;
const uint BATCH = 8;  // bins whose coefficient rows a thread reads before using them
shared vec2 fft_s[POINTS];
shared vec2 fft_twiddle_s[LENGTH];

#include "middle_max.glsl"
#include "shared_fft.glsl"

void main() {
  const uint pair = gl_WorkGroupID.y, block = gl_WorkGroupID.x, first_residue = block * RUNS, t = gl_LocalInvocationID.x;
  const uint N = push.num_states, T = push.window_length, R = push.residues;
  const bool has_odd = 2 * pair + 1 < push.num_q_heads;
  const vec2 middle_max = pair_middle_max(pair, has_odd);

  // RUNS consecutive points for each j.
  for (uint i = t; i < POINTS; i += WG) {
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
  // a warp reads consecutive places, for the places that hold a bin k in (-N, N). The block's
  // Z[k] goes to fft_twiddle_s at k mod 2N (the transform is done with the twiddles).
  for (uint place = t; place < LENGTH; place += WG) {
    const uint bin = fft_position(place, LENGTH_LOG2);
    const bool positive = bin < N;
    if (!positive && bin <= LENGTH - N) continue;
    const uint magnitude = positive ? bin : LENGTH - bin;
    vec2 sum = vec2(0.0);
    for (uint run = 0; run < RUNS && first_residue + run < R; ++run) {
      const uint turn = magnitude * (first_residue + run);  // |k| r < N R <= T / 2
      sum += complex_mul(fft_s[run * LENGTH + place], kvc_turn_cos_sin(positive && turn != 0 ? T - turn : turn, T));
    }
    fft_twiddle_s[positive ? bin : 2 * N - magnitude] = sum;
  }
  barrier();
  // The heads' spectra, (E_{2s}[n], E_{2s+1}[n]) at fft_s[2n], fft_s[2n + 1] for n < N (2N <= B).
  for (uint n = t; n < N; n += WG) {
    const vec2 z = fft_twiddle_s[n], mirror = fft_twiddle_s[n == 0 ? 0 : 2 * N - n] * vec2(1.0, -1.0);
    const vec2 difference = 0.5 * (z - mirror);
    fft_s[2 * n] = 0.5 * (z + mirror);
    fft_s[2 * n + 1] = vec2(difference.y, -difference.x);
  }
  barrier();

  // (C_v^T E)[c] of both heads: thread (part, lane) sums the rows of bins part, part +
  // VALUE_PARTS, ... at dims lane, lane + lanes, ... (one dim a thread where VALUE_PARTS > 1).
  const uint compressed = push.compressed, rows_2n = 2 * N;
  const uint kv_even = 2 * pair / push.group_size, kv_odd = min(2 * pair + 1, push.num_q_heads - 1) / push.group_size;
  const bool shared_rows = kv_even == kv_odd;
  const uint lanes = WG / VALUE_PARTS, part = t / lanes, lane = t % lanes;
  vec2 acc = vec2(0.0);  // (even head, odd head) at dim lane, where VALUE_PARTS > 1
  for (uint c = lane; c < compressed && part < VALUE_PARTS; c += lanes) {
    acc = vec2(0.0);
    for (uint first = part; first < N; first += BATCH * VALUE_PARTS) {
      vec4 rows[BATCH];  // (cos, sin) rows of bin n for the even head's kv head, then the odd's
      [[unroll]] for (uint k = 0; k < BATCH; ++k) {
        const uint n = first + k * VALUE_PARTS;
        const bool real = n < N;
        const uint even_at = (kv_even * rows_2n + 2 * n) * compressed + c, odd_at = (kv_odd * rows_2n + 2 * n) * compressed + c;
        rows[k].xy = real ? vec2(v_coefficients[even_at], v_coefficients[even_at + compressed]) : vec2(0.0);
        rows[k].zw = real && !shared_rows ? vec2(v_coefficients[odd_at], v_coefficients[odd_at + compressed]) : rows[k].xy;
      }
      [[unroll]] for (uint k = 0; k < BATCH; ++k) {
        const uint n = min(first + k * VALUE_PARTS, N - 1);  // past N: the rows are 0
        const vec2 even = fft_s[2 * n], odd = fft_s[2 * n + 1];
        acc += vec2(rows[k].x * even.x - rows[k].y * even.y, rows[k].z * odd.x - rows[k].w * odd.y);
      }
    }
    if (VALUE_PARTS == 1) {
      // Every bin summed by this thread: its dim's values at once.
      [[unroll]] for (uint slot = 0; slot < 2; ++slot) {
        const uint head = 2 * pair + slot, kv = slot == 0 ? kv_even : kv_odd;
        if (slot == 1 && !has_odd) continue;
        const uint row = (head * push.num_splits + push.first_value_split + block) * (HEAD_DIM + 2);
        const float scale = v_affine[2 * kv * compressed + c], offset = v_affine[(2 * kv + 1) * compressed + c];
        partials[row + 2 + v_dims[kv * HEAD_DIM + c]] = scale * acc[slot] + offset * fft_s[slot].x;
      }
    }
  }
  if (VALUE_PARTS > 1) {
    barrier();  // every E is read; the parts' sums go past B
    if (part < VALUE_PARTS && lane < compressed) fft_s[LENGTH + part * HEAD_DIM + lane] = acc;
    barrier();
  }

  // Per head: M, 0, and the dims' values (0 at the packed dims).
  [[unroll]] for (uint slot = 0; slot < 2; ++slot) {
    const uint head = 2 * pair + slot, kv = slot == 0 ? kv_even : kv_odd;
    if (slot == 1 && !has_odd) continue;
    const uint row = (head * push.num_splits + push.first_value_split + block) * (HEAD_DIM + 2);
    for (uint k = t; k < HEAD_DIM; k += WG) {  // k: the position in v_dims' order
      if (k < compressed && VALUE_PARTS == 1) continue;  // written above
      float value = 0.0;
      if (k < compressed) {
        float sum = 0.0;
        for (uint p = 0; p < VALUE_PARTS; ++p) sum += fft_s[LENGTH + p * HEAD_DIM + k][slot];
        value = v_affine[2 * kv * compressed + k] * sum + v_affine[(2 * kv + 1) * compressed + k] * fft_s[slot].x;
      }
      partials[row + 2 + v_dims[kv * HEAD_DIM + k]] = value;
    }
    if (t == 0) {
      partials[row] = slot == 0 ? middle_max.x : middle_max.y;
      partials[row + 1] = 0.0;
    }
  }
}
