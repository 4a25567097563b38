#version 450
// Spectral attention, pass 1 (ops/spectral_attention.h): per query, query head and stored bin,
// the product of the bin's key state with the query, S_K[b] . q (complex).
#extension GL_GOOGLE_include_directive : require
#include "elements.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool Q_F16 = false;

layout(binding = 0) readonly buffer Queries { uint q_words[]; };        // [num_queries][num_q_heads][HEAD_DIM]
layout(binding = 1) readonly buffer KeyStates { vec2 key_states[]; };   // [num_kv_heads][num_bins][HEAD_DIM]
layout(binding = 2) writeonly buffer Products { vec2 products[]; };     // [num_queries][num_q_heads][num_bins]

layout(push_constant) uniform Push {
  uint num_bins;
  uint rows;  // num_queries * num_q_heads
  uint num_q_heads;
  uint group;  // query heads per kv head
} push;

void main() {
  const uint items = push.rows * push.num_bins;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint bin = item % push.num_bins;
    const uint row = item / push.num_bins;
    const uint kv_head = (row % push.num_q_heads) / push.group;
    const uint state = (kv_head * push.num_bins + bin) * HEAD_DIM;
    vec2 sum = vec2(0.0);
    for (uint d = 0; d < HEAD_DIM; ++d) sum += key_states[state + d] * KVC_LOAD_ELEMENT(q_words, Q_F16, row * HEAD_DIM + d);
    products[item] = sum;
  }
}
