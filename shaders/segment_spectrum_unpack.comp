#version 450
// Separates the two real spectra a packed FFT holds, at the chosen bins: with Z the transform
// of a + i b, A[k] = (Z[k] + conj Z[T-k]) / 2 and B[k] = (Z[k] - conj Z[T-k]) / 2i. CHIRP (a
// chirp-z transform, ops/chirp_z_vulkan.h): Z[k] is the work's point j = k - span_first (mod T)
// times the span's chirp at j, c[span_first + j].
#extension GL_GOOGLE_include_directive : require
#include "bin_span.glsl"
#include "complex.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool CHIRP = false;

layout(binding = 0) readonly buffer Work { vec2 work[]; };  // one head's [HEAD_DIM / 2][P]
layout(binding = 1) readonly buffer Bins { uint bins[]; };
layout(binding = 2) writeonly buffer Spectrum { vec2 spectrum[]; };  // [num_heads][num_bins][HEAD_DIM]
layout(binding = 3) readonly buffer SpanChirp { vec2 span_chirp[]; };  // [span], CHIRP only

layout(push_constant) uniform Push {
  uint transform_length;
  uint num_bins;
  uint head;
  uint padded_length;  // P
  uint span_first;     // 0 without CHIRP
  float scale;
} push;

vec2 transformed(uint sequence, uint k) {
  const uint j = span_point(k, push.span_first, push.transform_length);
  const vec2 value = work[sequence + j];
  return CHIRP ? complex_mul(value, span_chirp[j]) : value;
}

void main() {
  const uint pairs = HEAD_DIM / 2u;
  const uint items = push.num_bins * pairs;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint pair = item % pairs;
    const uint b = item / pairs;
    const uint k = bins[b];
    const uint mirror = k == 0u ? 0u : push.transform_length - k;
    const uint sequence = pair * push.padded_length;
    const vec2 z = transformed(sequence, k);
    const vec2 zc = conjugate(transformed(sequence, mirror));
    const vec2 a = (0.5 * push.scale) * (z + zc);
    const vec2 d = (0.5 * push.scale) * (z - zc);
    const uint out_row = (push.head * push.num_bins + b) * HEAD_DIM + 2u * pair;
    spectrum[out_row] = a;
    spectrum[out_row + 1u] = vec2(d.y, -d.x);  // d / i
  }
}
