#version 450
// HiPPO-FourierT fit (ops/hippo_fourier.h): appendix D's standardization and sec. 3.4's
// reconstruction error of one dim of one head per workgroup. Each thread reconstructs F^T C at
// every WG-th token of the segment (Direct route), or reads it from the inverse transform of
// hippo_fourier_spectrum.comp (RECONSTRUCTED: the Transform route, one head per dispatch, dim
// j in component j % 2 of sequence j / 2), and keeps Welford moments of x and of the reconstruction r
// (means, centered sums of squares, co-moment); the moments are merged pairwise (Chan et al.),
// which stays accurate where sums of squares in f32 would cancel. With scale s = std(x) /
// std(r), the mean of (s (r - mean r) - (x - mean x))^2 is (s^2 M2r + M2x - 2 s Cxr) / L.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const bool ROWS_F16 = false;
layout(constant_id = 2) const bool RECONSTRUCTED = false;

#include "elements.glsl"
#include "fourier_turn.glsl"

layout(binding = 0) readonly buffer Rows { uint row_words[]; };
layout(binding = 1) readonly buffer Dims { uint dims[]; };
layout(binding = 2) readonly buffer Coefficients { float coefficients[]; };
layout(binding = 3) writeonly buffer Affine { float affine[]; };  // [heads][2][num_dims]
layout(binding = 4) writeonly buffer SquaredError { float squared_error[]; };
layout(binding = 5) readonly buffer Reconstruction { vec2 reconstruction[]; };  // [sequences][T]: RECONSTRUCTED only

layout(push_constant) uniform Push {
  uint head_dim;
  uint num_states;
  uint window_length;
  uint num_dims;
  uint slot_stride;
  uint first_slot;
  uint segment_length;
  uint first_index;
  uint first_head;  // of this dispatch
} push;

const uint WG = gl_WorkGroupSize.x;

// Per thread: count, mean x, mean r, M2 x, M2 r, co-moment.
shared float count_s[WG];
shared vec2 mean_s[WG];
shared vec3 moment_s[WG];

void main() {
  const uint j = gl_WorkGroupID.x;
  const uint head = push.first_head + gl_WorkGroupID.y;
  const uint t = gl_LocalInvocationID.x;
  const uint dim = dims[head * push.head_dim + j];
  const uint first_row = head * push.slot_stride + push.first_slot;
  const uint c_base = head * 2 * push.num_states * push.num_dims + j;

  float count = 0.0;
  vec2 mean = vec2(0.0);   // (x, r)
  vec3 moment = vec3(0.0); // (M2 x, M2 r, co-moment)
  for (uint i = t; i < push.segment_length; i += WG) {
    const float x = KVC_LOAD_ELEMENT(row_words, ROWS_F16, (first_row + i) * push.head_dim + dim);
    const uint index = (push.first_index + i) % push.window_length;
    float r = 0.0;
    if (RECONSTRUCTED) {
      const vec2 pair = reconstruction[(j / 2u) * push.window_length + index];
      r = (j & 1u) == 0u ? pair.x : pair.y;
    } else {
      uint turn = 0u;  // (n index) mod T, stepped by index for each n
      for (uint n = 0; n < push.num_states; ++n) {
        const vec2 basis = kvc_turn_cos_sin(turn, push.window_length);
        r += basis.x * coefficients[c_base + 2 * n * push.num_dims] + basis.y * coefficients[c_base + (2 * n + 1) * push.num_dims];
        turn += index;
        if (turn >= push.window_length) turn -= push.window_length;
      }
    }
    count += 1.0;
    const vec2 delta = vec2(x, r) - mean;
    mean += delta / count;
    const vec2 after = vec2(x, r) - mean;
    moment += vec3(delta.x * after.x, delta.y * after.y, delta.x * after.y);
  }
  count_s[t] = count;
  mean_s[t] = mean;
  moment_s[t] = moment;
  barrier();
  for (uint width = WG / 2; width > 0; width /= 2) {
    if (t < width) {
      const float count_a = count_s[t], count_b = count_s[t + width];
      const float total = count_a + count_b;
      if (count_b > 0.0) {
        const vec2 delta = mean_s[t + width] - mean_s[t];
        const float weight = count_a * count_b / total;
        moment_s[t] += moment_s[t + width] + vec3(delta.x * delta.x, delta.y * delta.y, delta.x * delta.y) * weight;
        mean_s[t] += delta * (count_b / total);
        count_s[t] = total;
      }
    }
    barrier();
  }
  if (t == 0) {
    const vec3 m = moment_s[0];
    const float scale = m.y > 0.0 ? sqrt(m.x / m.y) : 0.0;
    const vec2 means = mean_s[0];
    affine[2 * head * push.num_dims + j] = scale;
    affine[(2 * head + 1) * push.num_dims + j] = means.x - scale * means.y;
    squared_error[head * push.num_dims + j] = max(scale * scale * m.y + m.x - 2.0 * scale * m.z, 0.0) / float(push.segment_length);
  }
}
