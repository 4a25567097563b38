// In-place radix-2 FFTs in shared memory, for kernels that transform short runs of a longer
// signal without a trip through memory. Every run of 2^length_log2 points of fft_s (the includer
// declares `shared vec2 fft_s[]`, `points` of it in whole runs, and `shared vec2 fft_twiddle_s[]`
// of `length` entries) becomes its DFT, X_k = sum_j x_j e^(s 2 pi i j k / length) with s = +1
// (inverse, unscaled) or -1 (forward). One index of each pair is bit-reversed
// (fft_position): decimation in frequency takes x_j at j and leaves X_k at fft_position(k);
// decimation in time takes x_j at fft_position(j) and leaves X_k at k. The caller picks the form
// whose bit-reversed side it can read or write in whatever order it likes, so that a warp's
// shared-memory accesses stay on distinct banks. The twiddles are tabled once a workgroup, a
// stage's contiguous (entry h + k = e^(2 pi i k / 2h), so a warp's reads are consecutive), by
// exact angle reduction (fourier_turn.glsl: the built-in sin and cos are bounded only to 2^-11).
#include "complex.glsl"
#include "fourier_turn.glsl"

uint fft_position(uint k, uint length_log2) { return bitfieldReverse(k) >> (32u - length_log2); }

void shared_fft(uint points, uint length_log2, bool inverse, bool in_time) {
  const uint length = 1u << length_log2;
  for (uint entry = gl_LocalInvocationID.x + 1; entry < length; entry += gl_WorkGroupSize.x) {
    const uint half_log2 = uint(findMSB(entry)), k = entry - (1u << half_log2);
    fft_twiddle_s[entry] = kvc_turn_cos_sin(k << (length_log2 - 1u - half_log2), length);
  }
  for (uint stage = 0; stage < length_log2; ++stage) {
    // Decimation in time widens the spans (half-span 1 first), in frequency narrows them.
    const uint half_log2 = in_time ? stage : length_log2 - 1u - stage, half_span = 1u << half_log2;
    barrier();
    for (uint b = gl_LocalInvocationID.x; b < points / 2; b += gl_WorkGroupSize.x) {
      const uint k = b & (half_span - 1u);
      const uint i0 = ((b >> half_log2) << (half_log2 + 1u)) + k, i1 = i0 + half_span;
      vec2 w = fft_twiddle_s[half_span + k];
      if (!inverse) w.y = -w.y;
      const vec2 x0 = fft_s[i0], x1 = fft_s[i1];
      if (in_time) {
        const vec2 turned = complex_mul(x1, w);
        fft_s[i0] = x0 + turned;
        fft_s[i1] = x0 - turned;
      } else {
        fft_s[i0] = x0 + x1;
        fft_s[i1] = complex_mul(x0 - x1, w);
      }
    }
  }
  barrier();
}
