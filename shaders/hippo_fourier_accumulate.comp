#version 450
// HiPPO-FourierT projection, Transform route (ops/hippo_fourier.h): adds a segment's spectrum
// at bins 0 .. N - 1 (segment_spectrum, already times 1/T) to the coefficients of the chosen
// dims. Eq. 4's rows 2n and 2n + 1 are cos and sin of bin n, and the DFT's kernel is
// e^{-i angle}: the cos coefficient is Re X[n], the sin one -Im X[n].
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Spectrum { vec2 spectrum[]; };  // [heads][N][head_dim]
layout(binding = 1) readonly buffer Dims { uint dims[]; };          // [heads][head_dim]
layout(binding = 2) buffer Coefficients { float coefficients[]; };  // [heads][2N][num_dims]

layout(push_constant) uniform Push {
  uint head_dim;
  uint num_states;
  uint num_dims;
  uint num_heads;
} push;

void main() {
  const uint items = push.num_heads * push.num_states * push.num_dims;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint j = item % push.num_dims;
    const uint n = (item / push.num_dims) % push.num_states;
    const uint head = item / (push.num_dims * push.num_states);
    const vec2 bin = spectrum[(head * push.num_states + n) * push.head_dim + dims[head * push.head_dim + j]];
    const uint cos_index = (head * 2 * push.num_states + 2 * n) * push.num_dims + j;
    coefficients[cos_index] += bin.x;
    coefficients[cos_index + push.num_dims] -= bin.y;
  }
}
