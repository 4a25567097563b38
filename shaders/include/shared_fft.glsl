// In-place radix-2 decimation-in-frequency FFTs in shared memory, for kernels that transform
// short runs of a longer signal without a trip through memory. Every run of 2^length_log2
// points of fft_s (the includer declares `shared vec2 fft_s[]`, `points` of it in whole runs)
// becomes its DFT, X_k = sum_j x_j e^(s 2 pi i j k / length) with s = +1 (inverse, unscaled) or
// -1 (forward), X_k at index fft_position(k) of its run. The twiddles come from exact angle
// reduction (fourier_turn.glsl): the built-in sin and cos are bounded only to 2^-11.
#include "complex.glsl"
#include "fourier_turn.glsl"

uint fft_position(uint k, uint length_log2) { return bitfieldReverse(k) >> (32u - length_log2); }

void shared_fft(uint points, uint length_log2, bool inverse) {
  const uint length = 1u << length_log2;
  for (uint half_span = length >> 1; half_span > 0; half_span >>= 1) {
    barrier();
    for (uint b = gl_LocalInvocationID.x; b < points / 2; b += gl_WorkGroupSize.x) {
      const uint k = b % half_span;
      const uint i0 = (b / half_span) * 2 * half_span + k, i1 = i0 + half_span;
      const vec2 x0 = fft_s[i0], x1 = fft_s[i1];
      vec2 w = kvc_turn_cos_sin(k * (length / (2 * half_span)), length);
      if (!inverse) w.y = -w.y;
      fft_s[i0] = x0 + x1;
      fft_s[i1] = complex_mul(x0 - x1, w);
    }
  }
  barrier();
}
