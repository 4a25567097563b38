// Exact angle reduction for the translated Fourier basis (ops/hippo_fourier.h).
#include "quadrant_trig.glsl"

// cos and sin of 2 pi turn / T (turn < T <= 2^24): the nearest quarter turn is taken in
// integers, leaving 4 turn - quadrant T in [-T/2, T/2], exact in f32.
vec2 kvc_turn_cos_sin(uint turn, uint window_length) {
  const uint quadrant = (4u * turn + window_length / 2u) / window_length;
  const int rest = int(4u * turn) - int(quadrant * window_length);
  return kvc_quadrant_cos_sin(float(rest) * (1.5707963267948966 / float(window_length)), quadrant);
}
