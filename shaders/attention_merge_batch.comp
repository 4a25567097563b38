#version 450
// Flash-decoding, pass 2, for attention_decode_batch: workgroup (query head, cache, dim block)
// combines the cache's splits of that head into its share of the cache's own output, an
// element of the binding array.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;
const uint WG = gl_WorkGroupSize.x;

layout(constant_id = 3) const uint CACHES = 1;  // as attention_decode_batch's

layout(binding = 0) readonly buffer Partials { float partials[]; };  // as attention_decode_batch wrote them
layout(binding = 1) writeonly buffer Out { uint words[]; } outputs[CACHES];  // [num_q_heads][HEAD_DIM]
layout(binding = 2) writeonly buffer Lse { float lse[]; };  // [cache][num_q_heads]
layout(binding = 3) readonly buffer Table { uint table[]; };  // attention_decode_batch's

layout(push_constant) uniform Push {
  uint table_base;
  uint num_q_heads;
} push;

const uint CACHE_FIELDS = 4;
uint cache;

#define KVC_MERGE_OUT_WORDS outputs[cache].words
#include "merge_splits.glsl"

void main() {
  const uint head = gl_WorkGroupID.x;
  cache = gl_WorkGroupID.y;
  const uint record = push.table_base + CACHE_FIELDS * cache;
  const uint num_splits = table[record + 2], first_partial = table[record + 3];
  merge_splits(first_partial + head * num_splits, num_splits, head, cache * push.num_q_heads + head, gl_WorkGroupID.z,
               gl_NumWorkGroups.z);
}
