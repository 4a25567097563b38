#version 450
// Appends one chunk to one cache layer (append_row.glsl), the chunk described by push
// constants: workgroup (x, kv head).
#extension GL_GOOGLE_include_directive : require

layout(binding = 0) readonly buffer Keys { uint k_words[]; };
layout(binding = 1) readonly buffer Values { uint v_words[]; };
layout(binding = 2) writeonly buffer KeyCache { uint k_cache[]; };
layout(binding = 3) writeonly buffer ValueCache { uint v_cache[]; };
layout(binding = 4) writeonly buffer Positions { int positions[]; };
layout(binding = 5) readonly buffer Turns { uvec2 turns[]; };  // RoPE only

layout(push_constant) uniform Push {
  uint slot_stride;
  uint first_slot;
  uint num_tokens;
  uint num_kv_heads;
  int first_position;
  uint source_token;
} push;

#define KVC_APPEND_K_WORDS k_words
#define KVC_APPEND_V_WORDS v_words
#define KVC_APPEND_K_CACHE k_cache
#define KVC_APPEND_V_CACHE v_cache
#define KVC_APPEND_POSITIONS positions
#include "append_row.glsl"

void main() {
  append_chunk(AppendChunk(push.slot_stride, push.first_slot, push.num_tokens, push.num_kv_heads, push.first_position,
                           push.source_token, ROPE_STYLE != 0),
               gl_WorkGroupID.y);
}
