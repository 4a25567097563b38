#version 450
// Separates the two real spectra a packed FFT holds, at the chosen bins: with Z the transform
// of a + i b, A[k] = (Z[k] + conj Z[T-k]) / 2 and B[k] = (Z[k] - conj Z[T-k]) / 2i.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;

layout(binding = 0) readonly buffer Work { vec2 work[]; };  // one head's [HEAD_DIM / 2][T]
layout(binding = 1) readonly buffer Bins { uint bins[]; };
layout(binding = 2) writeonly buffer Spectrum { vec2 spectrum[]; };  // [num_heads][num_bins][HEAD_DIM]

layout(push_constant) uniform Push {
  uint transform_length;
  uint num_bins;
  uint head;
  float scale;
} push;

void main() {
  const uint pairs = HEAD_DIM / 2u;
  const uint items = push.num_bins * pairs;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint pair = item % pairs;
    const uint b = item / pairs;
    const uint k = bins[b];
    const uint mirror = k == 0u ? 0u : push.transform_length - k;
    const uint sequence = pair * push.transform_length;
    const vec2 z = work[sequence + k];
    const vec2 zc = work[sequence + mirror] * vec2(1.0, -1.0);
    const vec2 a = (0.5 * push.scale) * (z + zc);
    const vec2 d = (0.5 * push.scale) * (z - zc);
    const uint out_row = (push.head * push.num_bins + b) * HEAD_DIM + 2u * pair;
    spectrum[out_row] = a;
    spectrum[out_row + 1u] = vec2(d.y, -d.x);  // d / i
  }
}
