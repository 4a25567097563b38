#version 450
// dst = src, 16 bytes per thread and step, grid-stride: the device's practical bandwidth
// ceiling, which kvc-bench reports every op against.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Src { uvec4 src[]; };
layout(binding = 1) writeonly buffer Dst { uvec4 dst[]; };

layout(push_constant) uniform Push { uint vectors; } push;

void main() {
  for (uint i = gl_GlobalInvocationID.x; i < push.vectors; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) dst[i] = src[i];
}
