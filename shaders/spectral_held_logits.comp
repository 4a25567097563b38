#version 450
// Spectral attention, the held slots' logits: item (query head, slot) is the scaled dot of
// query first_query's head with the slot's key, or KVC_NEG_INF for a token newer than the query. The held
// slots are few (sinks and the recent window); one pass for all keeps the softmax free of
// per-slot reductions.
#extension GL_GOOGLE_include_directive : require
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;

layout(binding = 0) readonly buffer Queries { uint q_words[]; };
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Positions { int positions[]; };
layout(binding = 3) writeonly buffer HeldLogits { float held_logits[]; };  // [num_q_heads][num_slots]

layout(push_constant) uniform Push {
  uint first_query;
  uint num_slots;
  uint slot_stride;
  uint num_q_heads;
  uint group;
  int query_position;  // first_query's
  float scale;
} push;

void main() {
  const uint items = push.num_q_heads * push.num_slots;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint slot = item % push.num_slots, row = item / push.num_slots;
    const uint cell = (row / push.group) * push.slot_stride + slot;
    const uint q_row = push.first_query * push.num_q_heads + row;
    float logit = KVC_NEG_INF;
    if (positions[cell] <= push.query_position) {
      float sum = 0.0;
      for (uint d = 0; d < HEAD_DIM; d += 4u)
        sum += dot(KVC_LOAD_VEC4(q_words, KV_F16, q_row * HEAD_DIM + d), KVC_LOAD_VEC4(k_words, KV_F16, cell * HEAD_DIM + d));
      logit = sum * push.scale;
    }
    held_logits[item] = logit;
  }
}
