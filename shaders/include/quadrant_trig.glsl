// cos and sin where the built-ins are not precise enough (Vulkan bounds their error only to
// 2^-11): the caller reduces its angle exactly, in integers, to x in [-pi/4, pi/4] plus a
// number of quarter turns; Taylor polynomials on that range (error < 3e-8, below f32
// rounding) do the rest. Also the turn-to-radians step the built-in route (rope.glsl) and its
// precision probe (trig_precision.comp) share.
#ifndef KVC_QUADRANT_TRIG_GLSL
#define KVC_QUADRANT_TRIG_GLSL

// A signed fraction of a turn (2^-32 units: [-1/2, 1/2) turn) as an angle in radians.
float kvc_turn_angle(int fraction) { return float(fraction) * (6.283185307179586 / 4294967296.0); }

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
