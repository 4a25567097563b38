#version 450
// append_rows over a batch of caches in one dispatch (kvc_cache_append_batch_device):
// workgroup (x, kv head, entry), each entry one cache's chunk (a chunk that wraps a ring takes
// two), its buffers elements of binding arrays indexed by the entry, which is uniform per
// workgroup, its chunk a record of the table. The work itself is append_row.glsl's.
#extension GL_GOOGLE_include_directive : require

// Entries per dispatch, the binding arrays' length: what the device's descriptor limits allow
// (ops/batch_dispatch_vulkan.h), elements past the dispatch's entries bound to a stand-in.
layout(constant_id = 5) const uint ENTRIES = 1;

layout(binding = 0) readonly buffer Keys { uint words[]; } keys[ENTRIES];
layout(binding = 1) readonly buffer Values { uint words[]; } values[ENTRIES];
layout(binding = 2) writeonly buffer KeyCache { uint words[]; } key_caches[ENTRIES];
layout(binding = 3) writeonly buffer ValueCache { uint words[]; } value_caches[ENTRIES];
layout(binding = 4) writeonly buffer Positions { int slots[]; } positions[ENTRIES];
layout(binding = 5) readonly buffer Turns { uvec2 turns[]; };  // where an entry rotates its keys
// From table_base, per entry: slot_stride, first_slot, num_tokens, first_position (int bits),
// source_token, rotate_keys.
layout(binding = 6) readonly buffer Table { uint table[]; };

layout(push_constant) uniform Push {
  uint table_base;
  uint num_kv_heads;
} push;

const uint ENTRY_FIELDS = 6;
uint entry;  // this workgroup's, set before anything reads an entry's buffers

#define KVC_APPEND_K_WORDS keys[entry].words
#define KVC_APPEND_V_WORDS values[entry].words
#define KVC_APPEND_K_CACHE key_caches[entry].words
#define KVC_APPEND_V_CACHE value_caches[entry].words
#define KVC_APPEND_POSITIONS positions[entry].slots
#include "append_row.glsl"

void main() {
  entry = gl_WorkGroupID.z;
  const uint record = push.table_base + ENTRY_FIELDS * entry;
  append_chunk(AppendChunk(table[record], table[record + 1], table[record + 2], push.num_kv_heads, int(table[record + 3]),
                           table[record + 4], table[record + 5] != 0u),
               gl_WorkGroupID.y);
}
