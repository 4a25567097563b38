#version 450
// FreqKV's compression (ops/frequency_compress.h) of PAIRS pairs of head dims of one head, in
// place, in one pass over memory: the workgroup reads its columns' N rows once, transforms
// them in shared memory and writes the L compressed rows over them. No other workgroup touches
// these columns, and every row is read before any is written, so in place is safe. The R
// recent rows then move up behind the L, column for column by the same workgroup.
//
// Where one pair's signal is all that fits in shared memory (N = 4092 in f32: 32 KiB of the
// H100's 48), the workgroup takes ROUNDS batches of PAIRS pairs, holds them in registers and
// runs them through shared memory in turn, so that each thread reads and writes 16 contiguous
// bytes of a row: measured on the H100, the time of the loads and stores followed the number
// of L2 requests, not the bytes (8-byte pieces of 512-byte rows: 1.85 ms f32, 6.6x the floor).
//
// Two real columns (dims 2c, 2c+1) ride as one complex signal. Makhoul's algorithm: the DCT-II
// of length N is the real part of e^(-i pi t / 2N) times the FFT of the reordered column
// v = (x_0, x_2, x_4, ..., x_5, x_3, x_1); the DCT-III of length L is the real part of an
// inverse FFT of the coefficients times e^(i pi t / 2L), un-reordered the same way. The
// spectral step separates the two columns (Hermitian halves), keeps t < L, applies eq. 3's
// weights and rebuilds the pair's length-L spectrum. FFTs: in-place mixed radix, decimation in
// frequency forward (natural order in, digit-reversed out), decimation in time inverse
// (digit-reversed in, natural out), so no pass only permutes.
//
// A length with a prime factor above 31 (N - S = 2044 = 4 * 7 * 73) takes Bluestein's chirp-z
// route instead: with sign s, sum_n x_n e^(s 2 pi i n k / n') = c_k (a * b)_k, where
// c_m = e^(s i pi m^2 / n'), a_n = x_n c_n and b_m = conj c_m for |m| < n', a cyclic
// convolution of a smooth length M >= 2n' - 1 (the host's *_FFT_LENGTH): a forward FFT of the
// zero-padded a (digit-reversed out), times the host's transform of b in that order, an inverse
// FFT (natural out). Shared memory then holds M points a pair.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // THREADS >= PAIRS * SIGNAL_STRIDE / ITEMS_PER_THREAD
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool IS_F16 = false;
layout(constant_id = 3) const uint PAIRS = 1;         // pairs of head dims per workgroup
layout(constant_id = 4) const uint IN_LENGTH = 8;     // N
layout(constant_id = 5) const uint OUT_LENGTH = 4;    // L
// Stage radices of the two FFTs (IN_FFT_LENGTH and OUT_FFT_LENGTH points), 8 bits each,
// stage 0 in the lowest bits; 0 past the last stage.
layout(constant_id = 6) const uint IN_RADICES_LOW = 0;
layout(constant_id = 7) const uint IN_RADICES_HIGH = 0;
layout(constant_id = 8) const uint OUT_RADICES_LOW = 0;
layout(constant_id = 9) const uint OUT_RADICES_HIGH = 0;
layout(constant_id = 10) const uint ROUNDS = 1;  // 1, 2 or 4 batches of PAIRS pairs per workgroup
layout(constant_id = 11) const uint RECENT_LENGTH = 0;  // R: rows N .. N+R-1 move to L .. L+R-1
// FFT lengths of the two transforms: N and L themselves, or the chirp-z route's M.
layout(constant_id = 12) const uint IN_FFT_LENGTH = 8;
layout(constant_id = 13) const uint OUT_FFT_LENGTH = 4;

// One buffer seen as 4-, 8- and 16-byte words: a thread's 2 * ROUNDS elements of a row in one
// load (the host aligns them).
layout(binding = 0) buffer States { uint words[]; };
layout(binding = 0) buffer StatesDuos { uvec2 duos[]; };
layout(binding = 0) buffer StatesQuads { uvec4 quads[]; };
// e^(-2 pi i m / F) (m < F, F = IN_FFT_LENGTH), the same for OUT_FFT_LENGTH,
// e^(-i pi t / 2N) (t < L), e^(i pi t / 2L) (t < L); on the chirp-z route of the forward
// transform then its chirp e^(-i pi n^2 / N) (n < N) and its filter (F entries, digit-reversed),
// and of the inverse its chirp e^(i pi n^2 / L) (n < L) and filter. Built in double on the host.
layout(binding = 1) readonly buffer Twiddles { vec2 twiddles[]; };

layout(push_constant) uniform Push {
  uint first;          // element of words where head 0's first row starts; even
  uint head_elements;  // head_stride * HEAD_DIM
} push;

#include "small_dft.glsl"

const uint THREADS = gl_WorkGroupSize.x;
const uint ITEMS_PER_THREAD = 8;
const uint MAX_ROUNDS = 4;
const bool IN_CHIRP = IN_FFT_LENGTH != IN_LENGTH, OUT_CHIRP = OUT_FFT_LENGTH != OUT_LENGTH;
const uint IN_ROOTS = 0, OUT_ROOTS = IN_FFT_LENGTH;
const uint IN_SHIFTS = IN_FFT_LENGTH + OUT_FFT_LENGTH, OUT_SHIFTS = IN_SHIFTS + OUT_LENGTH;
const uint IN_CHIRPS = OUT_SHIFTS + OUT_LENGTH, IN_FILTER = IN_CHIRPS + (IN_CHIRP ? IN_LENGTH : 0);
const uint OUT_CHIRPS = IN_FILTER + (IN_CHIRP ? IN_FFT_LENGTH : 0), OUT_FILTER = OUT_CHIRPS + (OUT_CHIRP ? OUT_LENGTH : 0);
const uint SIGNAL_STRIDE = OUT_FFT_LENGTH > IN_FFT_LENGTH ? OUT_FFT_LENGTH : IN_FFT_LENGTH;  // both >= their lengths

shared vec2 signal[PAIRS * SIGNAL_STRIDE];  // pair p's transform at p * SIGNAL_STRIDE

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
#define FOR_EACH_IN_RADIX_REVERSED(STEP) \
  STEP(IN_RADIX_7) STEP(IN_RADIX_6) STEP(IN_RADIX_5) STEP(IN_RADIX_4) STEP(IN_RADIX_3) STEP(IN_RADIX_2) STEP(IN_RADIX_1) STEP(IN_RADIX_0)
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
// On the chirp-z route the convolution's inverse FFT leaves the transform in natural order.
uint in_position(uint k) {
  if (IN_CHIRP) return k;
  uint position = 0, span = IN_LENGTH;
  FOR_EACH_IN_RADIX(DIGIT)
  return position;
}
uint out_position(uint k) {
  if (OUT_CHIRP) return k;
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
    const uint first = (item / butterflies) * SIGNAL_STRIDE + (butterfly / stride) * span + j;
    vec2 x[MAX_RADIX];
    [[unroll]] for (uint q = 0; q < radix; ++q) {
      x[q] = signal[first + q * stride];
      if (inverse && q > 0) x[q] = complex_mul(x[q], twiddles[roots + j * q * root_step] * vec2(1.0, -1.0));
    }
    small_dft(x, radix, inverse);
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

// Entries t and L - t (0 <= t <= L / 2) of the length-L spectrum whose inverse FFT is the
// pair's DCT-III input reordered: with g_t = w_t X_t / N (w_0 = 1, w_t = 2: eq. 3's sqrt(L/N)
// times both orthonormal weights), a column's entry t is e^(i pi t / 2L) (g_t - i g_{L-t}) / 2
// (g_0 alone at t = 0), and the pair's is column a's plus i times column b's. Both entries
// take the same two coefficients, so one thread forms both. `at_mirror` is unset at t = 0.
void inverse_inputs(uint pair, uint t, out vec2 at_t, out vec2 at_mirror) {
  const uint base = pair * SIGNAL_STRIDE;
  const vec2 coefficient = dct_pair(base, t);
  if (t == 0) {
    at_t = coefficient / float(IN_LENGTH);
    return;
  }
  const vec2 mirror = dct_pair(base, OUT_LENGTH - t);
  at_t = complex_mul(twiddles[OUT_SHIFTS + t], vec2(coefficient.x + mirror.y, coefficient.y - mirror.x)) / float(IN_LENGTH);
  at_mirror = complex_mul(twiddles[OUT_SHIFTS + OUT_LENGTH - t], vec2(mirror.x + coefficient.y, mirror.y - coefficient.x)) /
              float(IN_LENGTH);
}

// Stores entry t of a pair's inverse-FFT input where the inverse stages expect it.
void store_inverse_input(uint pair, uint t, vec2 value) {
  signal[pair * SIGNAL_STRIDE + out_position(t)] = OUT_CHIRP ? complex_mul(value, twiddles[OUT_CHIRPS + t]) : value;
}

// The pairs of every round at element `at` of a row: round r's at at + 2 r.
void load_rounds(uint at, out vec2 values[MAX_ROUNDS]) {
  if (IS_F16 && ROUNDS == 1) {
    values[0] = unpackHalf2x16(words[at >> 1]);
  } else if (IS_F16 && ROUNDS == 2) {
    const uvec2 packed = duos[at >> 2];
    values[0] = unpackHalf2x16(packed.x);
    values[1] = unpackHalf2x16(packed.y);
  } else if (IS_F16) {
    const uvec4 packed = quads[at >> 3];
    [[unroll]] for (uint r = 0; r < MAX_ROUNDS; ++r) values[r] = unpackHalf2x16(packed[r]);
  } else if (ROUNDS == 1) {
    values[0] = uintBitsToFloat(duos[at >> 1]);
  } else {
    [[unroll]] for (uint r = 0; r < MAX_ROUNDS; r += 2)
      if (r < ROUNDS) {
        const uvec4 bits = quads[(at >> 2) + r / 2];
        values[r] = uintBitsToFloat(bits.xy);
        values[r + 1] = uintBitsToFloat(bits.zw);
      }
  }
}

void store_rounds(uint at, vec2 values[MAX_ROUNDS]) {
  if (IS_F16 && ROUNDS == 1) {
    words[at >> 1] = packHalf2x16(values[0]);
  } else if (IS_F16 && ROUNDS == 2) {
    duos[at >> 2] = uvec2(packHalf2x16(values[0]), packHalf2x16(values[1]));
  } else if (IS_F16) {
    quads[at >> 3] = uvec4(packHalf2x16(values[0]), packHalf2x16(values[1]), packHalf2x16(values[2]), packHalf2x16(values[3]));
  } else if (ROUNDS == 1) {
    duos[at >> 1] = floatBitsToUint(values[0]);
  } else {
    [[unroll]] for (uint r = 0; r < MAX_ROUNDS; r += 2)
      if (r < ROUNDS) quads[(at >> 2) + r / 2] = uvec4(floatBitsToUint(values[r]), floatBitsToUint(values[r + 1]));
  }
}

// Points [from, to) of every pair's signal set to zero (the chirp-z route's padding).
void zero_signal(uint from, uint to) {
  for (uint item = gl_LocalInvocationID.x; item < PAIRS * (to - from); item += THREADS)
    signal[(item / (to - from)) * SIGNAL_STRIDE + from + item % (to - from)] = vec2(0.0);
}

// Points [0, count) of every pair's signal times the table's entries from `first` on.
void multiply_signal(uint first, uint count) {
  for (uint item = gl_LocalInvocationID.x; item < PAIRS * count; item += THREADS) {
    const uint at = (item / count) * SIGNAL_STRIDE + item % count;
    signal[at] = complex_mul(signal[at], twiddles[first + item % count]);
  }
}

// Makhoul's order: even rows ascending, then odd rows descending.
uint makhoul_position(uint row, uint length) { return (row & 1u) == 0 ? row / 2 : length - 1 - row / 2; }

void main() {
  const uint thread = gl_LocalInvocationID.x;
  // Pair p of round r is the workgroup's column pair p * ROUNDS + r.
  const uint columns = push.first + gl_WorkGroupID.y * push.head_elements + gl_WorkGroupID.x * 2 * PAIRS * ROUNDS;

  // Rows are read with pairs fastest (coalesced), all loads issued before any store. held[0]
  // is always the round in shared memory: after each round the slots rotate, its output
  // moving to the last, so that every index stays a constant.
  vec2 held[MAX_ROUNDS][ITEMS_PER_THREAD];
  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * THREADS;
    if (item < PAIRS * IN_LENGTH) {
      vec2 values[MAX_ROUNDS];
      load_rounds(columns + (item / PAIRS) * HEAD_DIM + 2 * ROUNDS * (item % PAIRS), values);
      [[unroll]] for (uint r = 0; r < MAX_ROUNDS; ++r) held[r][i] = values[r];
    }
  }

  // Each sequence of stages runs over `stage_length` points with the roots at `stage_roots`.
  uint span, stage_length, stage_roots;
#define FORWARD_STAGE(radix)                                      \
  if (radix != 0) {                                               \
    fft_stage(stage_length, stage_roots, radix, span, false);     \
    span /= radix;                                                \
    barrier();                                                    \
  }
#define INVERSE_STAGE(radix)                                      \
  if (radix != 0) {                                               \
    span *= radix;                                                \
    fft_stage(stage_length, stage_roots, radix, span, true);      \
    barrier();                                                    \
  }

  // Not unrolled: each copy of the FFT stages costs lavapipe seconds of pipeline compile.
  [[dont_unroll]] for (uint round = 0; round < ROUNDS; ++round) {
    [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
      const uint item = thread + i * THREADS;
      if (item < PAIRS * IN_LENGTH) {
        const uint position = makhoul_position(item / PAIRS, IN_LENGTH);
        const vec2 value = IN_CHIRP ? complex_mul(held[0][i], twiddles[IN_CHIRPS + position]) : held[0][i];
        signal[(item % PAIRS) * SIGNAL_STRIDE + position] = value;
      }
    }
    if (IN_CHIRP) zero_signal(IN_LENGTH, IN_FFT_LENGTH);
    barrier();

    stage_length = IN_FFT_LENGTH, stage_roots = IN_ROOTS, span = stage_length;
    FOR_EACH_IN_RADIX(FORWARD_STAGE)
    if (IN_CHIRP) {
      multiply_signal(IN_FILTER, IN_FFT_LENGTH);
      barrier();
      span = 1;
      FOR_EACH_IN_RADIX_REVERSED(INVERSE_STAGE)
      multiply_signal(IN_CHIRPS, IN_LENGTH);
      barrier();
    }

    // Every pair of entries (t, L - t) reads four coefficients from anywhere in the signal it
    // overwrites: all are computed into registers before any is stored.
    const uint HALVES = OUT_LENGTH / 2 + 1;  // t = 0 .. L / 2 per pair
    vec2 mirrors[ITEMS_PER_THREAD];
    [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
      const uint item = thread + i * THREADS;
      if (item < PAIRS * HALVES) inverse_inputs(item / HALVES, item % HALVES, held[0][i], mirrors[i]);
    }
    barrier();
    [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
      const uint item = thread + i * THREADS, pair = item / HALVES, t = item % HALVES;
      if (item < PAIRS * HALVES) {
        store_inverse_input(pair, t, held[0][i]);
        if (t != 0 && 2 * t != OUT_LENGTH) store_inverse_input(pair, OUT_LENGTH - t, mirrors[i]);
      }
    }
    if (OUT_CHIRP) zero_signal(OUT_LENGTH, OUT_FFT_LENGTH);
    barrier();

    stage_length = OUT_FFT_LENGTH, stage_roots = OUT_ROOTS;
    if (OUT_CHIRP) {
      span = stage_length;
      FOR_EACH_OUT_RADIX(FORWARD_STAGE)
      multiply_signal(OUT_FILTER, OUT_FFT_LENGTH);
      barrier();
    }
    span = 1;
    FOR_EACH_OUT_RADIX_REVERSED(INVERSE_STAGE)
    if (OUT_CHIRP) {
      multiply_signal(OUT_CHIRPS, OUT_LENGTH);
      barrier();
    }

    [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
      const uint item = thread + i * THREADS;
      if (item < PAIRS * OUT_LENGTH)
        held[0][i] = signal[(item % PAIRS) * SIGNAL_STRIDE + makhoul_position(item / PAIRS, OUT_LENGTH)];
    }
    barrier();  // the next round's signal overwrites this one
    [[unroll]] for (uint r = 0; r + 1 < MAX_ROUNDS; ++r)
      if (r + 1 < ROUNDS)
        [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
          const vec2 done = held[r][i];
          held[r][i] = held[r + 1][i];
          held[r + 1][i] = done;
        }
  }

  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * THREADS;
    if (item < PAIRS * OUT_LENGTH) {
      vec2 values[MAX_ROUNDS];
      [[unroll]] for (uint r = 0; r < MAX_ROUNDS; ++r) values[r] = held[r][i];
      store_rounds(columns + (item / PAIRS) * HEAD_DIM + 2 * ROUNDS * (item % PAIRS), values);
    }
  }

  // Row N + r moves to row L + r in chunks of N - L rows: a chunk writes only rows the one
  // before it has read (row L + r is row N + r - (N - L)), hence the barrier between them,
  // and the first only rows the transform read before its first barrier.
  const uint WORD_ELEMENTS = IS_F16 ? 2 : 1, SEGMENT_WORDS = 2 * PAIRS * ROUNDS / WORD_ELEMENTS;
  const uint ROW_WORDS = HEAD_DIM / WORD_ELEMENTS, CHUNK_ROWS = IN_LENGTH - OUT_LENGTH;
  const uint segment = columns / WORD_ELEMENTS;
  for (uint chunk = 0; chunk < RECENT_LENGTH; chunk += CHUNK_ROWS) {
    if (chunk > 0) {
      memoryBarrierBuffer();
      barrier();
    }
    const uint rows = min(CHUNK_ROWS, RECENT_LENGTH - chunk);
    for (uint item = thread; item < rows * SEGMENT_WORDS; item += THREADS) {
      const uint row = chunk + item / SEGMENT_WORDS, word = segment + item % SEGMENT_WORDS;
      words[word + (OUT_LENGTH + row) * ROW_WORDS] = words[word + (IN_LENGTH + row) * ROW_WORDS];
    }
  }
}
