#version 450
// Window scores, step 3: per kv head and prefix slot, the probabilities exp(logit - max) /
// sum of the group's query heads and the window's queries, summed (SnapKV's vote; HitKV's
// cumulative attention). With WRITE_PROBS (HitKV ranks each row) the probabilities also
// replace the logits; without, the logits are only read: the 128 MiB a layer of the kvc-bench
// shape that the step no longer writes back.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool WRITE_PROBS = false;

layout(binding = 0) buffer Logits { float logits[]; };  // [num_q_heads][window][num_prefix]
layout(binding = 1) readonly buffer RowStats { vec2 row_stats[]; };  // [rows] (max, 1 / sum)
layout(binding = 2) writeonly buffer Sums { float sums[]; };         // [num_kv_heads][num_prefix]

layout(push_constant) uniform Push {
  uint num_prefix;
  uint slot_stride;
  uint window;
  uint group_size;
  uint num_q_heads;
  uint num_tiles;
} push;

void main() {
  const uint slot = gl_GlobalInvocationID.x;
  const uint kv_head = gl_WorkGroupID.y;
  if (slot >= push.num_prefix) return;
  const uint first_row = kv_head * push.group_size * push.window;
  float total = 0.0;
  for (uint row = first_row; row < first_row + push.group_size * push.window; ++row) {
    const vec2 stats = row_stats[row];
    const float p = exp(logits[row * push.num_prefix + slot] - stats.x) * stats.y;
    if (WRITE_PROBS) logits[row * push.num_prefix + slot] = p;
    total += p;
  }
  sums[kv_head * push.num_prefix + slot] = total;
}
