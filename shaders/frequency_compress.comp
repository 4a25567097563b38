#version 450
// FreqKV's compression (ops/frequency_compress.h) of PAIRS pairs of head dims of one head, in
// place, in one pass over memory: the workgroup reads its columns' N rows once, transforms
// them in shared memory and writes the L compressed rows over them. No other workgroup touches
// these columns, and every row is read before any is written, so in place is safe.
//
// Two real columns (dims 2c, 2c+1) ride as one complex signal. Makhoul's algorithm: the DCT-II
// of length N is the real part of e^(-i pi t / 2N) times the FFT of the reordered column
// v = (x_0, x_2, x_4, ..., x_5, x_3, x_1); the DCT-III of length L is the real part of an
// inverse FFT of the coefficients times e^(i pi t / 2L), un-reordered the same way. The
// spectral step separates the two columns (Hermitian halves), keeps t < L, applies eq. 3's
// weights and rebuilds the pair's length-L spectrum. FFTs: in-place mixed radix, decimation in
// frequency forward (natural order in, digit-reversed out), decimation in time inverse
// (digit-reversed in, natural out), so no pass only permutes.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // THREADS >= PAIRS * IN_LENGTH / ITEMS_PER_THREAD
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool IS_F16 = false;
layout(constant_id = 3) const uint PAIRS = 1;         // pairs of head dims per workgroup
layout(constant_id = 4) const uint IN_LENGTH = 8;     // N
layout(constant_id = 5) const uint OUT_LENGTH = 4;    // L
// Stage radices of the length-N and length-L FFTs, 8 bits each, stage 0 in the lowest bits;
// 0 past the last stage.
layout(constant_id = 6) const uint IN_RADICES_LOW = 0;
layout(constant_id = 7) const uint IN_RADICES_HIGH = 0;
layout(constant_id = 8) const uint OUT_RADICES_LOW = 0;
layout(constant_id = 9) const uint OUT_RADICES_HIGH = 0;

layout(binding = 0) buffer States { uint words[]; };
// e^(-2 pi i m / N) (m < N), e^(-2 pi i m / L) (m < L), e^(-i pi t / 2N) (t < L),
// e^(i pi t / 2L) (t < L), built in double on the host.
layout(binding = 1) readonly buffer Twiddles { vec2 twiddles[]; };

layout(push_constant) uniform Push {
  uint first;          // element of words where head 0's first row starts; even
  uint head_elements;  // head_stride * HEAD_DIM
} push;

#include "small_dft.glsl"

const uint THREADS = gl_WorkGroupSize.x;
const uint ITEMS_PER_THREAD = 8;
const uint IN_ROOTS = 0, OUT_ROOTS = IN_LENGTH;
const uint IN_SHIFTS = IN_LENGTH + OUT_LENGTH, OUT_SHIFTS = IN_LENGTH + 2 * OUT_LENGTH;

shared vec2 signal[PAIRS * IN_LENGTH];  // pair p's transform at p * IN_LENGTH

// Each stage's radix is a specialization constant of its own and every stage is written out
// (the FOR_EACH_* lists below), not looped over: the driver then sees the radix at every call
// before it unrolls anything. Looping over the stages made lavapipe unroll every radix's
// butterfly in every stage before discarding them: 5 to 20 s per pipeline.
#define RADIX(packed_low, packed_high, stage) \
  ((((stage) < 4 ? (packed_low) : (packed_high)) >> (8 * ((stage) % 4))) & 255u)
const uint IN_RADIX_0 = RADIX(IN_RADICES_LOW, IN_RADICES_HIGH, 0), IN_RADIX_1 = RADIX(IN_RADICES_LOW, IN_RADICES_HIGH, 1);
const uint IN_RADIX_2 = RADIX(IN_RADICES_LOW, IN_RADICES_HIGH, 2), IN_RADIX_3 = RADIX(IN_RADICES_LOW, IN_RADICES_HIGH, 3);
const uint IN_RADIX_4 = RADIX(IN_RADICES_LOW, IN_RADICES_HIGH, 4), IN_RADIX_5 = RADIX(IN_RADICES_LOW, IN_RADICES_HIGH, 5);
const uint IN_RADIX_6 = RADIX(IN_RADICES_LOW, IN_RADICES_HIGH, 6), IN_RADIX_7 = RADIX(IN_RADICES_LOW, IN_RADICES_HIGH, 7);
const uint OUT_RADIX_0 = RADIX(OUT_RADICES_LOW, OUT_RADICES_HIGH, 0), OUT_RADIX_1 = RADIX(OUT_RADICES_LOW, OUT_RADICES_HIGH, 1);
const uint OUT_RADIX_2 = RADIX(OUT_RADICES_LOW, OUT_RADICES_HIGH, 2), OUT_RADIX_3 = RADIX(OUT_RADICES_LOW, OUT_RADICES_HIGH, 3);
const uint OUT_RADIX_4 = RADIX(OUT_RADICES_LOW, OUT_RADICES_HIGH, 4), OUT_RADIX_5 = RADIX(OUT_RADICES_LOW, OUT_RADICES_HIGH, 5);
const uint OUT_RADIX_6 = RADIX(OUT_RADICES_LOW, OUT_RADICES_HIGH, 6), OUT_RADIX_7 = RADIX(OUT_RADICES_LOW, OUT_RADICES_HIGH, 7);
#define FOR_EACH_IN_RADIX(STEP) \
  STEP(IN_RADIX_0) STEP(IN_RADIX_1) STEP(IN_RADIX_2) STEP(IN_RADIX_3) STEP(IN_RADIX_4) STEP(IN_RADIX_5) STEP(IN_RADIX_6) STEP(IN_RADIX_7)
#define FOR_EACH_OUT_RADIX(STEP) \
  STEP(OUT_RADIX_0) STEP(OUT_RADIX_1) STEP(OUT_RADIX_2) STEP(OUT_RADIX_3) STEP(OUT_RADIX_4) STEP(OUT_RADIX_5) STEP(OUT_RADIX_6) STEP(OUT_RADIX_7)
#define FOR_EACH_OUT_RADIX_REVERSED(STEP) \
  STEP(OUT_RADIX_7) STEP(OUT_RADIX_6) STEP(OUT_RADIX_5) STEP(OUT_RADIX_4) STEP(OUT_RADIX_3) STEP(OUT_RADIX_2) STEP(OUT_RADIX_1) STEP(OUT_RADIX_0)

// Where a decimation-in-frequency FFT leaves output k: the radices' digits of k, least
// significant first, become the most significant digits of the position.
#define DIGIT(radix)                          \
  if (radix != 0) {                           \
    span /= radix;                            \
    position += (k % radix) * span;           \
    k /= radix;                               \
  }
uint in_position(uint k) {
  uint position = 0, span = IN_LENGTH;
  FOR_EACH_IN_RADIX(DIGIT)
  return position;
}
uint out_position(uint k) {
  uint position = 0, span = OUT_LENGTH;
  FOR_EACH_OUT_RADIX(DIGIT)
  return position;
}

// One stage over every pair's signal: radix-`radix` butterflies within sub-transforms of
// `span` points. Forward: DFT, then twiddle W_span^(j q); inverse, its transpose with conjugate
// roots: twiddle, then DFT.
void fft_stage(uint length, uint roots, uint radix, uint span, bool inverse) {
  const uint stride = span / radix, butterflies = length / radix, root_step = length / span;
  for (uint item = gl_LocalInvocationID.x; item < PAIRS * butterflies; item += THREADS) {
    const uint butterfly = item % butterflies, j = butterfly % stride;
    const uint first = (item / butterflies) * IN_LENGTH + (butterfly / stride) * span + j;
    vec2 x[MAX_RADIX];
    [[unroll]] for (uint q = 0; q < radix; ++q) {
      x[q] = signal[first + q * stride];
      if (inverse && q > 0) x[q] = complex_mul(x[q], twiddles[roots + j * q * root_step] * vec2(1.0, -1.0));
    }
    small_dft(x, radix, roots, length / radix, inverse);
    [[unroll]] for (uint q = 0; q < radix; ++q) {
      if (!inverse && q > 0) x[q] = complex_mul(x[q], twiddles[roots + j * q * root_step]);
      signal[first + q * stride] = x[q];
    }
  }
}

// The unnormalised DCT-II coefficient t of the pair's two columns, from their joint FFT Z:
// column a's spectrum is (Z_t + conj Z_{N-t}) / 2, column b's (Z_t - conj Z_{N-t}) / 2i.
vec2 dct_pair(uint base, uint t) {
  const vec2 z = signal[base + in_position(t)];
  const vec2 mirror = signal[base + in_position((IN_LENGTH - t) % IN_LENGTH)];
  const vec2 conj_mirror = vec2(mirror.x, -mirror.y), shift = twiddles[IN_SHIFTS + t];
  return 0.5 * vec2(complex_mul(shift, z + conj_mirror).x, complex_mul(shift, z - conj_mirror).y);
}

// Entry t of the length-L spectrum whose inverse FFT is the pair's DCT-III input reordered:
// with g_t = w_t X_t / N (w_0 = 1, w_t = 2: eq. 3's sqrt(L/N) times both orthonormal weights),
// a column's entry is e^(i pi t / 2L) (g_t - i g_{L-t}) / 2 (g_0 alone at t = 0), and the
// pair's is column a's plus i times column b's.
vec2 inverse_input(uint pair, uint t) {
  const uint base = pair * IN_LENGTH;
  const vec2 coefficient = dct_pair(base, t);
  if (t == 0) return coefficient / float(IN_LENGTH);
  const vec2 mirror = dct_pair(base, OUT_LENGTH - t);
  return complex_mul(twiddles[OUT_SHIFTS + t], vec2(coefficient.x + mirror.y, coefficient.y - mirror.x)) / float(IN_LENGTH);
}

vec2 load_pair(uint at) {
  return IS_F16 ? unpackHalf2x16(words[at >> 1]) : uintBitsToFloat(uvec2(words[at], words[at + 1u]));
}

void store_pair(uint at, vec2 value) {
  if (IS_F16) {
    words[at >> 1] = packHalf2x16(value);
  } else {
    words[at] = floatBitsToUint(value.x);
    words[at + 1u] = floatBitsToUint(value.y);
  }
}

// Makhoul's order: even rows ascending, then odd rows descending.
uint makhoul_position(uint row, uint length) { return (row & 1u) == 0 ? row / 2 : length - 1 - row / 2; }

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint columns = push.first + gl_WorkGroupID.y * push.head_elements + gl_WorkGroupID.x * 2 * PAIRS;

  // Rows are read with pairs fastest (coalesced), all loads issued before any store.
  vec2 held[ITEMS_PER_THREAD];
  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * THREADS;
    if (item < PAIRS * IN_LENGTH) held[i] = load_pair(columns + (item / PAIRS) * HEAD_DIM + 2 * (item % PAIRS));
  }
  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * THREADS;
    if (item < PAIRS * IN_LENGTH) signal[(item % PAIRS) * IN_LENGTH + makhoul_position(item / PAIRS, IN_LENGTH)] = held[i];
  }
  barrier();

  uint span = IN_LENGTH;
#define FORWARD_STAGE(radix)                           \
  if (radix != 0) {                                    \
    fft_stage(IN_LENGTH, IN_ROOTS, radix, span, false); \
    span /= radix;                                     \
    barrier();                                         \
  }
  FOR_EACH_IN_RADIX(FORWARD_STAGE)

  // Every entry reads four coefficients from anywhere in the signal it overwrites: all are
  // computed into registers before any is stored.
  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * THREADS;
    if (item < PAIRS * OUT_LENGTH) held[i] = inverse_input(item / OUT_LENGTH, item % OUT_LENGTH);
  }
  barrier();
  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * THREADS;
    if (item < PAIRS * OUT_LENGTH)
      signal[(item / OUT_LENGTH) * IN_LENGTH + out_position(item % OUT_LENGTH)] = held[i];
  }
  barrier();

  span = 1;
#define INVERSE_STAGE(radix)                            \
  if (radix != 0) {                                     \
    span *= radix;                                      \
    fft_stage(OUT_LENGTH, OUT_ROOTS, radix, span, true); \
    barrier();                                          \
  }
  FOR_EACH_OUT_RADIX_REVERSED(INVERSE_STAGE)

  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * THREADS;
    if (item < PAIRS * OUT_LENGTH) {
      const uint row = item / PAIRS, pair = item % PAIRS;
      store_pair(columns + row * HEAD_DIM + 2 * pair, signal[pair * IN_LENGTH + makhoul_position(row, OUT_LENGTH)]);
    }
  }
}
