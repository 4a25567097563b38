#version 450
// How far the device's built-in cos and sin are from the exact values, over a full turn (the
// host compares, vulkan/trig_precision.h): Vulkan bounds their error only to 2^-11, so kernels
// take them for RoPE only where this measured them precise. Each invocation writes an angle as
// rope_cos_sin_builtin forms it (a signed fraction of a turn, every 2^18th with a hashed offset,
// so that the samples cover [-pi, pi) and the values between the steps) and the built-ins of it.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 128) in;  // the size every Vulkan device allows

layout(binding = 0) writeonly buffer Samples { float samples[]; };  // [invocation]: angle, cos, sin

#include "quadrant_trig.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x;
  const uint fraction = i * 262144u + ((i * 2654435761u) & 262143u);
  const float angle = kvc_turn_angle(int(fraction));
  samples[3 * i] = angle;
  samples[3 * i + 1] = cos(angle);
  samples[3 * i + 2] = sin(angle);
}
