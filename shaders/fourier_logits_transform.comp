#version 450
// FourierAttention decode, factorized route, step 2 where T = R B with B a power of two >= 2N
// (ops/fourier_attention.h): F^T a, the inverse DFT of fourier_query_coefficients' spectrum W,
// whose bins are zero but for n in (-N, N). For point t = r + R j (r < R, j < B),
//   X[t] = sum_n W[n] e^(2 pi i n t / T) = sum_n (W[n] e^(2 pi i n r / T)) e^(2 pi i n j / B),
// so each residue r is a B-point inverse DFT of W twiddled: short enough for shared memory.
// It reads a pair's 2N - 1 bins and writes its L middle points once, where a length-T transform
// through memory writes W's zeros first and then passes every point through memory each pass.
// Workgroup (block of RUNS residues, pair of query heads).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // max(32, POINTS / 4): a radix-4 butterfly a thread a stage
layout(constant_id = 1) const uint LENGTH_LOG2 = 10;  // B = 2^LENGTH_LOG2
layout(constant_id = 2) const uint RUNS = 4;          // residues a workgroup

layout(binding = 0) readonly buffer Spectrum { vec2 spectrum[]; };  // W: [pairs][2N], bin n at n mod 2N
layout(binding = 1) writeonly buffer Logits { vec2 logits[]; };     // [pairs][T]: points 0 .. L - 1

layout(push_constant) uniform Push {
  uint num_states;     // N
  uint window_length;  // T
  uint num_middle;     // L
  uint residues;       // R = T / B
} push;

const uint LENGTH = 1u << LENGTH_LOG2;
const uint POINTS = RUNS * LENGTH;
shared vec2 fft_s[POINTS];
shared vec2 fft_twiddle_s[LENGTH];

#include "shared_fft.glsl"

void main() {
  const uint pair = gl_WorkGroupID.y, first_residue = gl_WorkGroupID.x * RUNS, t = gl_LocalInvocationID.x;
  const uint N = push.num_states, T = push.window_length, R = push.residues;
  // Decimation in time: bin m of each run goes to its bit-reversed place, so that a warp writes
  // consecutive places (its reads of the 2N bins hit the cache) and the points leave in order.
  for (uint i = t; i < POINTS; i += gl_WorkGroupSize.x) {
    const uint run = i >> LENGTH_LOG2, m = fft_position(i & (LENGTH - 1u), LENGTH_LOG2), r = first_residue + run;
    const bool positive = m < N, negative = m > LENGTH - N;  // bin m, or bin m - B
    vec2 value = vec2(0.0);
    if (r < R && (positive || negative)) {
      const uint magnitude = positive ? m : LENGTH - m;
      const uint turn = magnitude * r;  // |n| r < N R <= T / 2
      const vec2 bin = spectrum[pair * 2 * N + (positive ? m : 2 * N - magnitude)];
      value = complex_mul(bin, kvc_turn_cos_sin(positive || turn == 0 ? turn : T - turn, T));
    }
    fft_s[i] = value;
  }
  shared_fft(POINTS, LENGTH_LOG2, true, true);
  // RUNS consecutive points for each j.
  for (uint i = t; i < POINTS; i += gl_WorkGroupSize.x) {
    const uint run = i % RUNS, j = i / RUNS, r = first_residue + run, point = r + R * j;
    if (r < R && point < push.num_middle) logits[pair * T + point] = fft_s[run * LENGTH + j];
  }
}
