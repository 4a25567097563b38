// (a * b) mod m exactly for a, b < m < 2^26, without 64-bit integers: a quotient estimated in
// f32 is off by at most 16, so the remainder taken with wrapping 32-bit products lies within
// 17 m of the true one (inside an int) and a few steps correct it.
#ifndef KVC_MODULAR_GLSL
#define KVC_MODULAR_GLSL

uint kvc_mulmod(uint a, uint b, uint m) {
  const uint quotient = uint(float(a) * float(b) / float(m));
  int remainder = int(a * b - quotient * m);
  while (remainder < 0) remainder += int(m);
  while (remainder >= int(m)) remainder -= int(m);
  return uint(remainder);
}

const float KVC_TWO_PI = 6.283185307179586;

#endif
