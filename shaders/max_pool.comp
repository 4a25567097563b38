#version 450
// 1-D max pooling with same padding: one thread per element, rows along y.
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer In { float values[]; };
layout(binding = 1) writeonly buffer Out { float pooled[]; };

layout(push_constant) uniform Push {
  uint row_length;
  uint radius;
} push;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= push.row_length) return;
  const uint base = gl_WorkGroupID.y * push.row_length;
  const uint first = i > push.radius ? i - push.radius : 0u;
  const uint last = min(push.row_length - 1u, i + push.radius);
  float best = values[base + first];
  for (uint j = first + 1u; j <= last; ++j) best = max(best, values[base + j]);
  pooled[base + i] = best;
}
