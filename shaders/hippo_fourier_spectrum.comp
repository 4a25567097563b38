#version 450
// HiPPO-FourierT fit, Transform route (ops/hippo_fourier.h): one head's coefficients as the
// spectra whose inverse DFT is the reconstruction F^T C at every basis index. Dim j's
// r[t] = sum_n a_n cos(2 pi n t / T) + b_n sin(2 pi n t / T) = Re sum_n Y_n e^{2 pi i n t / T}
// with Y_n = a_n - i b_n; made Hermitian, Z[k] = Y_k / 2 + conj(Y_{T-k}) / 2 (each term where
// its index is below N; bin 0 gets Re Y_0), its inverse DFT is r itself, real. Dims 2s and
// 2s + 1 of the chosen ones share sequence s as Z_a + i Z_b, so one complex inverse transform
// yields r_a + i r_b (an odd last dim pairs with zero).
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Coefficients { float coefficients[]; };  // [heads][2N][num_dims]
layout(binding = 1) writeonly buffer Work { vec2 work[]; };                 // [sequences][T]

layout(push_constant) uniform Push {
  uint num_states;
  uint window_length;
  uint num_dims;
  uint head;
} push;

// Y_n of dim j, or 0 for n >= N or a dim past the last.
vec2 state(uint n, uint j) {
  if (n >= push.num_states || j >= push.num_dims) return vec2(0.0);
  const uint cos_index = (push.head * 2 * push.num_states + 2 * n) * push.num_dims + j;
  return vec2(coefficients[cos_index], -coefficients[cos_index + push.num_dims]);
}

vec2 hermitian(uint k, uint j) {
  const uint mirror = k == 0u ? 0u : push.window_length - k;
  const vec2 conj_mirror = state(mirror, j) * vec2(1.0, -1.0);
  return 0.5 * (state(k, j) + conj_mirror);
}

void main() {
  const uint sequences = (push.num_dims + 1u) / 2u;
  const uint items = sequences * push.window_length;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint k = item % push.window_length;
    const uint s = item / push.window_length;
    const vec2 a = hermitian(k, 2u * s), b = hermitian(k, 2u * s + 1u);
    work[item] = vec2(a.x - b.y, a.y + b.x);  // a + i b
  }
}
