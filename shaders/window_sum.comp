#version 450
// Window scores, last step: per kv head and prefix slot, the probabilities exp(logit - max) /
// sum of the group's query heads and the window's queries, summed (SnapKV's vote; HitKV's
// cumulative attention) in one read of the logits. With COUNT_HITS it also counts the rows
// that rank the slot in their top K (HitKV's hits, against window_hit_threshold's bounds).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool COUNT_HITS = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Logits { float logits[]; };      // [num_q_heads][window][num_prefix]
layout(binding = 1) readonly buffer RowStats { vec2 row_stats[]; };  // [rows] (max, 1 / sum)
layout(binding = 2) writeonly buffer Sums { float sums[]; };         // [num_kv_heads][num_prefix]
layout(binding = 3) readonly buffer Bounds { uvec2 bounds[]; };      // [rows] (T's key, last tied position taken)
layout(binding = 4) writeonly buffer Hits { uint hits[]; };          // [num_kv_heads][num_prefix]

layout(push_constant) uniform Push {
  uint num_prefix;
  uint slot_stride;
  uint window;
  uint group_size;
  uint num_q_heads;
  uint num_tiles;
} push;

// Rows are read ROW_BATCH at a time before any is used, so a thread keeps that many loads in
// flight (one at a time, the pass over 128 MiB of logits ran at 64% of the H100's copy bandwidth).
const uint ROW_BATCH = 8;

void main() {
  const uint slot = gl_GlobalInvocationID.x;
  const uint kv_head = gl_WorkGroupID.y;
  if (slot >= push.num_prefix) return;
  const uint first_row = kv_head * push.group_size * push.window, end_row = first_row + push.group_size * push.window;
  float total = 0.0;
  uint count = 0u;
  for (uint row = first_row; row < end_row; row += ROW_BATCH) {
    float batch[ROW_BATCH];
    [[unroll]] for (uint b = 0; b < ROW_BATCH; ++b) batch[b] = row + b < end_row ? logits[(row + b) * push.num_prefix + slot] : 0.0;
    [[unroll]] for (uint b = 0; b < ROW_BATCH; ++b) {
      if (row + b >= end_row) break;
      const float logit = batch[b];
      const vec2 stats = row_stats[row + b];
      total += exp(logit - stats.x) * stats.y;
      if (COUNT_HITS) {
        const uvec2 bound = bounds[row + b];
        const uint key = kvc_ordered_key(floatBitsToUint(logit));
        count += key > bound.x || (key == bound.x && slot <= bound.y) ? 1u : 0u;
      }
    }
  }
  sums[kv_head * push.num_prefix + slot] = total;
  if (COUNT_HITS) hits[kv_head * push.num_prefix + slot] = count;
}
