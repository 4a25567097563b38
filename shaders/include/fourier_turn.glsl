// Exact angle reduction for the translated Fourier basis (ops/hippo_fourier.h): (a b) mod T
// for a, b, T below 2^31, in 32-bit integers (shifts and adds, no 64-bit types needed).
uint kvc_mul_mod(uint a, uint b, uint window_length) {
  a %= window_length;
  uint result = 0u;
  for (int bit = 31; bit >= 0; --bit) {
    result = 2u * result;
    if (result >= window_length) result -= window_length;
    if (((b >> uint(bit)) & 1u) != 0u) {
      result += a;
      if (result >= window_length) result -= window_length;
    }
  }
  return result;
}

// cos and sin of 2 pi turn / T, the angle taken in [-pi, pi]: Vulkan bounds the error of
// cos and sin only there.
vec2 kvc_turn_cos_sin(uint turn, uint window_length) {
  const float signed_turn = 2u * turn > window_length ? -float(window_length - turn) : float(turn);
  const float angle = 6.28318530717958647692 * signed_turn / float(window_length);
  return vec2(cos(angle), sin(angle));
}
