#version 450
// Window scores, step 3: per kv head and prefix slot, the probabilities summed over the
// group's query heads and the window's queries (SnapKV's vote; HitKV's cumulative attention).
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Probs { float probs[]; };  // [num_q_heads][window][num_prefix]
layout(binding = 1) writeonly buffer Sums { float sums[]; };   // [num_kv_heads][num_prefix]

layout(push_constant) uniform Push {
  uint num_prefix;
  uint slot_stride;
  uint window;
  uint group_size;
  uint num_q_heads;
} push;

void main() {
  const uint slot = gl_GlobalInvocationID.x;
  const uint kv_head = gl_WorkGroupID.y;
  if (slot >= push.num_prefix) return;
  const uint first_row = kv_head * push.group_size * push.window;
  float total = 0.0;
  for (uint row = first_row; row < first_row + push.group_size * push.window; ++row) total += probs[row * push.num_prefix + slot];
  sums[kv_head * push.num_prefix + slot] = total;
}
