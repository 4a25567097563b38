#version 450
// Scatters a token-major chunk into a cache layer's head-major rows: item (token, word) of a
// kv head moves one 32-bit word of the token's K and V row; word == ROW_WORDS writes the
// slot's position. With RoPE the word's key elements are rotated to the slot's position
// (their pair partners read from the same source row).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROW_WORDS = 64;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint ROPE_STYLE = 0;
layout(constant_id = 4) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

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

const uint WORD_ELEMENTS = KV_F16 ? 2 : 1;

// Element d of the source key row whose first word is `row_word`, rotated to `position`.
float rotated_key_element(uint row_word, uint d, uint position) {
  const uint row_element = row_word * WORD_ELEMENTS;
  const float x = KVC_LOAD_ELEMENT(k_words, KV_F16, row_element + d);
  if (d >= ROTARY_DIMS) return x;
  const uint half_dims = ROTARY_DIMS / 2;
  const bool first = ROPE_STYLE == 2 ? (d & 1u) == 0 : d < half_dims;
  const uint pair = ROPE_STYLE == 2 ? d / 2 : (first ? d : d - half_dims);
  const uint partner_d = ROPE_STYLE == 2 ? d ^ 1u : (first ? d + half_dims : d - half_dims);
  const float partner = KVC_LOAD_ELEMENT(k_words, KV_F16, row_element + partner_d);
  return rope_rotate_element(x, partner, rope_cos_sin(position, turns[pair]), first);
}

uint key_word(uint row_word, uint word, uint position) {
  if (ROPE_STYLE == 0) return k_words[row_word + word];
  if (KV_F16)
    return packHalf2x16(vec2(rotated_key_element(row_word, 2 * word, position), rotated_key_element(row_word, 2 * word + 1, position)));
  return floatBitsToUint(rotated_key_element(row_word, word, position));
}

void main() {
  const uint kv_head = gl_WorkGroupID.y;
  const uint items = push.num_tokens * (ROW_WORDS + 1u);
  // A grid-stride loop: a chunk may hold more items than one dispatch has threads.
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint token = item / (ROW_WORDS + 1u);
    const uint word = item % (ROW_WORDS + 1u);
    const uint to = kv_head * push.slot_stride + push.first_slot + token;
    const int position = push.first_position + int(token);
    if (word == ROW_WORDS) {
      positions[to] = position;
    } else {
      const uint row_word = ((push.source_token + token) * push.num_kv_heads + kv_head) * ROW_WORDS;
      k_cache[to * ROW_WORDS + word] = key_word(row_word, word, uint(position));
      v_cache[to * ROW_WORDS + word] = v_words[row_word + word];
    }
  }
}
