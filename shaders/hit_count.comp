#version 450
// HitKV hits: one thread per (row, named index) adds one hit to that key of the row's kv head.
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Indices { uint indices[]; };  // [kv_heads * rows][index_stride]
layout(binding = 1) buffer Counts { uint counts[]; };             // [kv_heads][num_keys], zeroed

layout(push_constant) uniform Push {
  uint rows_per_kv_head;
  uint hits_per_row;
  uint index_stride;
  uint num_keys;
} push;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= push.hits_per_row) return;
  const uint kv_head = gl_WorkGroupID.z;
  const uint row = kv_head * push.rows_per_kv_head + gl_WorkGroupID.y;
  atomicAdd(counts[kv_head * push.num_keys + indices[row * push.index_stride + i]], 1u);
}
