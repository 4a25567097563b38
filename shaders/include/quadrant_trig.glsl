// cos and sin where the built-ins are not precise enough (Vulkan bounds their error only to
// 2^-11): the caller reduces its angle exactly, in integers, to x in [-pi/4, pi/4] plus a
// number of quarter turns; Taylor polynomials on that range (error < 3e-8, below f32
// rounding) do the rest.
#ifndef KVC_QUADRANT_TRIG_GLSL
#define KVC_QUADRANT_TRIG_GLSL

vec2 kvc_quadrant_cos_sin(float x, uint quadrant) {
  const float x2 = x * x;
  const float s = x * (1.0 + x2 * (-1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (-1.0 / 5040.0 + x2 * (1.0 / 362880.0)))));
  const float c = 1.0 + x2 * (-0.5 + x2 * (1.0 / 24.0 + x2 * (-1.0 / 720.0 + x2 * (1.0 / 40320.0))));
  switch (quadrant & 3u) {
    case 0u: return vec2(c, s);
    case 1u: return vec2(-s, c);
    case 2u: return vec2(-c, -s);
    default: return vec2(s, -c);
  }
}

#endif
