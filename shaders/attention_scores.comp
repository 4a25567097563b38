#version 450
// Per kv head and slot, the attention probability summed over the kv head's query heads and
// the chunk's queries: sum exp(q.k - lse) over the queries that see the slot (causal).
// One thread per slot; the log-sum-exps come from attention_prefill (decode's scores come from
// its own logits: decode_scores).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint ROPE_STYLE = 0;
layout(constant_id = 4) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { float q_rot[]; };  // [num_queries][num_q_heads][HEAD_DIM]
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Positions { int positions[]; };
layout(binding = 3) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 4) readonly buffer Lse { float lse[]; };
layout(binding = 5) writeonly buffer Scores { float scores[]; };  // [num_kv_heads][num_slots]

layout(push_constant) uniform Push {
  uint num_slots;
  uint slot_stride;
  uint num_queries;
  uint group_size;
  uint num_q_heads;
} push;

#include "key_chunk.glsl"

const uint CHUNKS = HEAD_DIM / 4;

void main() {
  const uint slot = gl_GlobalInvocationID.x;
  const uint kv_head = gl_WorkGroupID.y;
  if (slot >= push.num_slots) return;
  const uint slot_base = kv_head * push.slot_stride;
  const uint row_element = (slot_base + slot) * HEAD_DIM;
  const uint position = ROPE_STYLE != 0 ? uint(positions[slot_base + slot]) : 0u;
  vec4 key[KVC_MAX_CHUNKS];
  for (uint c = 0; c < CHUNKS; ++c) key[c] = key_chunk(row_element, 4 * c, position);

  const uint first_chunk_slot = push.num_slots - push.num_queries;
  const uint first_query = slot > first_chunk_slot ? slot - first_chunk_slot : 0u;
  float total = 0.0;
  for (uint query = first_query; query < push.num_queries; ++query) {
    for (uint g = 0; g < push.group_size; ++g) {
      const uint head = kv_head * push.group_size + g;
      const uint q_base = (query * push.num_q_heads + head) * HEAD_DIM;
      float s = 0.0;
      for (uint c = 0; c < CHUNKS; ++c)
        s += dot(key[c], vec4(q_rot[q_base + 4 * c], q_rot[q_base + 4 * c + 1], q_rot[q_base + 4 * c + 2], q_rot[q_base + 4 * c + 3]));
      total += exp(s - lse[query * push.num_q_heads + head]);
    }
  }
  scores[kv_head * push.num_slots + slot] = total;
}
