// Scattering a token-major chunk into a cache layer's head-major rows, shared by append_rows
// (one cache, its chunk in push constants) and append_rows_batch (many, their chunks in a
// table): item (token, word) of a kv head moves one 32-bit word of the token's K and V row;
// word == ROW_WORDS writes the slot's position. Keys stored rotated have the word's elements
// rotated to the slot's position (their pair partners read from the same source row).
//
// The includer declares turns[] (rope_turn_table; read only where a chunk rotates) and names
// the chunk's buffers through macros, so that one kernel binds one cache and the other an
// array of caches: KVC_APPEND_K_WORDS and KVC_APPEND_V_WORDS (the chunk, uint words),
// KVC_APPEND_K_CACHE and KVC_APPEND_V_CACHE (the layer's rows, uint words) and
// KVC_APPEND_POSITIONS (int).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROW_WORDS = 64;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint ROPE_STYLE = 0;  // of the keys stored rotated; 0: none are
layout(constant_id = 4) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

// Where a chunk lands, as ops::AppendRowsShape says.
struct AppendChunk {
  uint slot_stride;
  uint first_slot;
  uint num_tokens;
  uint num_kv_heads;
  int first_position;
  uint source_token;
  bool rotate_keys;  // stored rotated (ROPE_STYLE != 0)
};

const uint WORD_ELEMENTS = KV_F16 ? 2 : 1;

// Element d of the source key row whose first word is `row_word`, rotated to `position`.
float rotated_key_element(uint row_word, uint d, uint position) {
  const uint row_element = row_word * WORD_ELEMENTS;
  const float x = KVC_LOAD_ELEMENT(KVC_APPEND_K_WORDS, KV_F16, row_element + d);
  if (d >= ROTARY_DIMS) return x;
  const RopeDim at = rope_dim(d);
  const float partner = KVC_LOAD_ELEMENT(KVC_APPEND_K_WORDS, KV_F16, row_element + at.partner);
  return rope_stored_element(x, partner, position, turns[at.pair], at.first);
}

uint key_word(bool rotate_keys, uint row_word, uint word, uint position) {
  if (ROPE_STYLE == 0 || !rotate_keys) return KVC_APPEND_K_WORDS[row_word + word];
  if (KV_F16)
    return packHalf2x16(vec2(rotated_key_element(row_word, 2 * word, position), rotated_key_element(row_word, 2 * word + 1, position)));
  return floatBitsToUint(rotated_key_element(row_word, word, position));
}

// This invocation's items of the chunk's `kv_head` rows: a grid-stride loop over x, as a chunk
// may hold more items than one dispatch has threads.
void append_chunk(AppendChunk chunk, uint kv_head) {
  const uint items = chunk.num_tokens * (ROW_WORDS + 1u);
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint token = item / (ROW_WORDS + 1u);
    const uint word = item % (ROW_WORDS + 1u);
    const uint to = kv_head * chunk.slot_stride + chunk.first_slot + token;
    const int position = chunk.first_position + int(token);
    if (word == ROW_WORDS) {
      KVC_APPEND_POSITIONS[to] = position;
    } else {
      const uint row_word = ((chunk.source_token + token) * chunk.num_kv_heads + kv_head) * ROW_WORDS;
      KVC_APPEND_K_CACHE[to * ROW_WORDS + word] = key_word(chunk.rotate_keys, row_word, word, uint(position));
      KVC_APPEND_V_CACHE[to * ROW_WORDS + word] = KVC_APPEND_V_WORDS[row_word + word];
    }
  }
}
