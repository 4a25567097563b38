// In-place FFTs in shared memory (radix 4, and one radix-2 stage where log2 of the length is
// odd), for kernels that transform short runs of a longer signal without a trip through
// memory. Every run of 2^length_log2 points of fft_s (the includer declares `shared vec2
// fft_s[]`, `points` of it in whole runs, and `shared vec2 fft_twiddle_s[]` of `length` entries)
// becomes its DFT, X_k = sum_j x_j e^(s 2 pi i j k / length) with s = +1 (inverse, unscaled) or
// -1 (forward). One index of each pair is bit-reversed (fft_position): decimation in frequency
// takes x_j at j and leaves X_k at fft_position(k); decimation in time takes x_j at
// fft_position(j) and leaves X_k at k. The caller picks the form whose bit-reversed side it can
// read or write in whatever order it likes, so that a warp's accesses to that side are
// consecutive places rather than bit-reversed ones (32 to a bank). The twiddles are tabled once a workgroup, a radix-2 stage's contiguous (entry
// h + k = e^(2 pi i k / 2h) for half-span h, so a warp's reads are consecutive), by exact angle
// reduction (fourier_turn.glsl: the built-in sin and cos are bounded only to 2^-11).
#include "complex.glsl"
#include "fourier_turn.glsl"

uint fft_position(uint k, uint length_log2) { return bitfieldReverse(k) >> (32u - length_log2); }

vec2 fft_twiddle(uint entry, bool inverse) {
  const vec2 w = fft_twiddle_s[entry];
  return inverse ? w : conjugate(w);
}

// One radix-2 butterfly: (x0 + w x1, x0 - w x1) in time, (x0 + x1, (x0 - x1) w) in frequency.
void fft_butterfly(inout vec2 x0, inout vec2 x1, vec2 w, bool in_time) {
  if (in_time) {
    const vec2 turned = complex_mul(x1, w);
    x1 = x0 - turned;
    x0 += turned;
  } else {
    const vec2 difference = x0 - x1;
    x0 += x1;
    x1 = complex_mul(difference, w);
  }
}

// The radix-2 stage of half-span 2^half_log2.
void fft_radix2(uint points, uint half_log2, bool inverse, bool in_time) {
  const uint half_span = 1u << half_log2;
  for (uint b = gl_LocalInvocationID.x; b < points / 2; b += gl_WorkGroupSize.x) {
    const uint k = b & (half_span - 1u);
    const uint i0 = ((b >> half_log2) << (half_log2 + 1u)) + k, i1 = i0 + half_span;
    vec2 x0 = fft_s[i0], x1 = fft_s[i1];
    fft_butterfly(x0, x1, fft_twiddle(half_span + k, inverse), in_time);
    fft_s[i0] = x0;
    fft_s[i1] = x1;
  }
}

// The radix-2 stages of half-spans h = 2^half_log2 and 2h at once, on points i, i + h, i + 2h,
// i + 3h: 2h then h in frequency, h then 2h in time.
void fft_radix4(uint points, uint half_log2, bool inverse, bool in_time) {
  const uint h = 1u << half_log2;
  for (uint b = gl_LocalInvocationID.x; b < points / 4; b += gl_WorkGroupSize.x) {
    const uint k = b & (h - 1u);
    const uint i0 = ((b >> half_log2) << (half_log2 + 2u)) + k;
    const vec2 narrow = fft_twiddle(h + k, inverse), wide0 = fft_twiddle(2 * h + k, inverse), wide1 = fft_twiddle(3 * h + k, inverse);
    vec2 x0 = fft_s[i0], x1 = fft_s[i0 + h], x2 = fft_s[i0 + 2 * h], x3 = fft_s[i0 + 3 * h];
    if (in_time) {
      fft_butterfly(x0, x1, narrow, true);
      fft_butterfly(x2, x3, narrow, true);
      fft_butterfly(x0, x2, wide0, true);
      fft_butterfly(x1, x3, wide1, true);
    } else {
      fft_butterfly(x0, x2, wide0, false);
      fft_butterfly(x1, x3, wide1, false);
      fft_butterfly(x0, x1, narrow, false);
      fft_butterfly(x2, x3, narrow, false);
    }
    fft_s[i0] = x0;
    fft_s[i0 + h] = x1;
    fft_s[i0 + 2 * h] = x2;
    fft_s[i0 + 3 * h] = x3;
  }
}

void shared_fft(uint points, uint length_log2, bool inverse, bool in_time) {
  const uint length = 1u << length_log2;
  for (uint entry = gl_LocalInvocationID.x + 1; entry < length; entry += gl_WorkGroupSize.x) {
    const uint half_log2 = uint(findMSB(entry)), k = entry - (1u << half_log2);
    fft_twiddle_s[entry] = kvc_turn_cos_sin(k << (length_log2 - 1u - half_log2), length);
  }
  // Half-spans 2^s: from the widest down in frequency, from 1 up in time; pairs of stages, and
  // the odd one left last (half-span 1 in frequency, the widest in time).
  for (uint stage_pair = 0; stage_pair < length_log2 / 2; ++stage_pair) {
    barrier();
    fft_radix4(points, in_time ? 2 * stage_pair : length_log2 - 2 - 2 * stage_pair, inverse, in_time);
  }
  if (length_log2 % 2 == 1) {
    barrier();
    fft_radix2(points, in_time ? length_log2 - 1 : 0, inverse, in_time);
  }
  barrier();
}
