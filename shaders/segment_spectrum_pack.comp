#version 450
// Packs one head's segment of cache rows into complex sequences for one FFT: sequence j
// holds dim 2j as its real part and dim 2j + 1 as its imaginary part, at window points
// window_offset .. window_offset + length - 1 of a zero-padded window of T points.
#extension GL_GOOGLE_include_directive : require
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;

layout(binding = 0) readonly buffer States { uint state_words[]; };
layout(binding = 1) writeonly buffer Work { vec2 work[]; };  // [HEAD_DIM / 2][T]

layout(push_constant) uniform Push {
  uint slot_stride;
  uint first_slot;
  uint segment_length;
  uint transform_length;
  uint window_offset;
  uint head;
} push;

void main() {
  const uint pairs = HEAD_DIM / 2u;
  const uint points = pairs * push.transform_length;
  // Consecutive threads take consecutive pairs of one window point, so reads of a row coalesce.
  for (uint item = gl_GlobalInvocationID.x; item < points; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint pair = item % pairs;
    const uint point = item / pairs;
    vec2 value = vec2(0.0);
    if (point >= push.window_offset && point - push.window_offset < push.segment_length) {
      const uint element = ((push.head * push.slot_stride + push.first_slot + point - push.window_offset) * HEAD_DIM) + 2u * pair;
      value = vec2(KVC_LOAD_ELEMENT(state_words, KV_F16, element), KVC_LOAD_ELEMENT(state_words, KV_F16, element + 1u));
    }
    work[pair * push.transform_length + point] = value;
  }
}
