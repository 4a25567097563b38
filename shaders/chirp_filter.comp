#version 450
// The convolution of a chirp-z transform (vulkan/fft.h, ChirpFilter): every sequence's
// spectrum times the filter's, which already holds the inverse transform's 1 / P; REVERSED
// (a transform from the span's bins to every point) reads the filter's spectrum at -f, the
// spectrum of the filter reversed in time. Item: a point, for all sequences, so the filter is
// read once; the sequences' values BATCH at a time, every load of a batch before its stores (a
// store to the buffer kept the next load from issuing: 16 sequences were 16 trips to memory
// in a row).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "complex.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool REVERSED = false;

layout(binding = 0) buffer Work { vec2 work[]; };                         // [sequences][padded_length]
layout(binding = 1) readonly buffer Filter { vec2 filter_spectrum[]; };  // [padded_length]

layout(push_constant) uniform Push {
  uint padded_length;
  uint sequences;
} push;

const uint BATCH = 16;

void main() {
  for (uint point = gl_GlobalInvocationID.x; point < push.padded_length; point += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const vec2 filter_point = filter_spectrum[REVERSED && point != 0u ? push.padded_length - point : point];
    for (uint first = 0u; first < push.sequences; first += BATCH) {
      vec2 values[BATCH];
      [[unroll]] for (uint k = 0u; k < BATCH; ++k)
        if (first + k < push.sequences) values[k] = work[(first + k) * push.padded_length + point];
      [[unroll]] for (uint k = 0u; k < BATCH; ++k)
        if (first + k < push.sequences) work[(first + k) * push.padded_length + point] = complex_mul(values[k], filter_point);
    }
  }
}
