#version 450
// Sec. 3.4's dim choice (ops/hippo_fourier.h), one head per workgroup, one thread per dim: a
// dim's rank is how many dims err less (or as much, at a lower index); the num_dims lowest
// ranks are compressed. A compressed dim's place is the count of compressed dims below it;
// an uncompressed one's, num_dims plus the count of uncompressed dims below it.
layout(local_size_x_id = 0) in;  // >= head_dim

layout(binding = 0) readonly buffer SquaredError { float squared_error[]; };  // [heads][head_dim]
layout(binding = 1) writeonly buffer Dims { uint dims[]; };                    // [heads][head_dim]

layout(push_constant) uniform Push {
  uint head_dim;
  uint num_dims;
} push;

shared float error_s[gl_WorkGroupSize.x];
shared bool compressed_s[gl_WorkGroupSize.x];

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint d = gl_LocalInvocationID.x;
  const bool real = d < push.head_dim;
  if (real) error_s[d] = squared_error[head * push.head_dim + d];
  barrier();
  uint rank = 0;
  if (real)
    for (uint other = 0; other < push.head_dim; ++other)
      if (error_s[other] < error_s[d] || (error_s[other] == error_s[d] && other < d)) ++rank;
  const bool compressed = real && rank < push.num_dims;
  compressed_s[d] = compressed;
  barrier();
  if (!real) return;
  uint below = 0;  // dims of the same kind below d
  for (uint other = 0; other < d; ++other)
    if (compressed_s[other] == compressed) ++below;
  dims[head * push.head_dim + (compressed ? below : push.num_dims + below)] = d;
}
