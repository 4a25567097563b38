#version 450
// Flash-decoding, pass 1, over a batch of caches in one dispatch (kvc_attend_batch_device):
// every cache's K, V, positions and query are elements of binding arrays indexed by the cache,
// which is uniform per workgroup. Workgroup (split, kv head, query-head block), where the split
// runs over every cache's splits in turn: the table says whose split it is, so a long cache
// gets many workgroups and a short one few, and no workgroup idles. The caches share their
// shape, RoPE and KEYS_ROTATED; the work itself is decode_split.glsl's, and
// attention_merge_batch combines the splits.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

// Caches per dispatch, the binding arrays' length: what the device's descriptor limits allow
// (attention_batch_vulkan.cpp), unused elements bound to a stand-in.
layout(constant_id = 9) const uint CACHES = 1;

layout(binding = 0) readonly buffer Query { uint words[]; } queries[CACHES];  // [num_q_heads][HEAD_DIM], before RoPE
layout(binding = 1) readonly buffer Keys { uvec4 vec[]; } keys[CACHES];
layout(binding = 1) readonly buffer KeyWords { uint words[]; } key_words[CACHES];  // the same keys, for RoPE partners
layout(binding = 1) readonly buffer KeyHalves { uvec2 halves[]; } key_halves[CACHES];  // and in 8-byte units (key_dim)
layout(binding = 2) readonly buffer Values { uvec4 vec[]; } values[CACHES];
layout(binding = 3) readonly buffer Positions { int slots[]; } positions[CACHES];
layout(binding = 4) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 5) writeonly buffer Partials { float partials[]; };  // per cache from first_partial: [num_q_heads][num_splits][HEAD_DIM + 2]
// From table_base: per cache (CACHES of them) num_slots, slot_stride, num_splits, first_partial;
// then per workgroup split its cache and the cache's split.
layout(binding = 6) readonly buffer Table { uint table[]; };

layout(push_constant) uniform Push {
  uint table_base;
  uint group_size;
  float scale;  // 1 / sqrt(HEAD_DIM)
} push;

const uint CACHE_FIELDS = 4;
uint cache;  // this workgroup's, set before anything reads a cache's buffers

#define KVC_DECODE_QUERY_WORDS queries[cache].words
#define KVC_DECODE_KEY_VEC keys[cache].vec
#define KVC_DECODE_KEY_WORDS key_words[cache].words
#define KVC_DECODE_KEY_HALVES key_halves[cache].halves
#define KVC_DECODE_VALUE_VEC values[cache].vec
#define KVC_DECODE_POSITIONS positions[cache].slots
#define KVC_DECODE_STORE_LOGIT(index, value)
#define KVC_DECODE_STORE_LOGIT4(index, value)
#include "decode_split.glsl"

void main() {
  const uint split_entry = push.table_base + CACHE_FIELDS * CACHES + 2 * gl_WorkGroupID.x;
  cache = table[split_entry];
  const uint record = push.table_base + CACHE_FIELDS * cache;
  decode_split(DecodeRange(table[record], table[record + 1], table[split_entry + 1], table[record + 2], table[record + 2], table[record + 3],
                           push.group_size, push.scale));
}
