// Complex numbers as vec2 (re, im).
#ifndef KVC_COMPLEX_GLSL
#define KVC_COMPLEX_GLSL

vec2 complex_mul(vec2 a, vec2 b) { return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
vec2 times_i(vec2 a) { return vec2(-a.y, a.x); }
vec2 conjugate(vec2 a) { return vec2(a.x, -a.y); }

#endif
