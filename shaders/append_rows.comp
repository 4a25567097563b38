#version 450
// Scatters a token-major chunk into a cache layer's head-major rows: item (token, word) of a
// kv head moves one 32-bit word of the token's K and V row; word == ROW_WORDS writes the
// slot's position.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROW_WORDS = 64;

layout(binding = 0) readonly buffer Keys { uint k_words[]; };
layout(binding = 1) readonly buffer Values { uint v_words[]; };
layout(binding = 2) writeonly buffer KeyCache { uint k_cache[]; };
layout(binding = 3) writeonly buffer ValueCache { uint v_cache[]; };
layout(binding = 4) writeonly buffer Positions { int positions[]; };

layout(push_constant) uniform Push {
  uint slot_stride;
  uint first_slot;
  uint num_tokens;
  uint num_kv_heads;
  int first_position;
  uint source_token;
} push;

void main() {
  const uint kv_head = gl_WorkGroupID.y;
  const uint items = push.num_tokens * (ROW_WORDS + 1u);
  // A grid-stride loop: a chunk may hold more items than one dispatch has threads.
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint token = item / (ROW_WORDS + 1u);
    const uint word = item % (ROW_WORDS + 1u);
    const uint to = kv_head * push.slot_stride + push.first_slot + token;
    if (word == ROW_WORDS) {
      positions[to] = push.first_position + int(token);
    } else {
      const uint from = ((push.source_token + token) * push.num_kv_heads + kv_head) * ROW_WORDS + word;
      k_cache[to * ROW_WORDS + word] = k_words[from];
      v_cache[to * ROW_WORDS + word] = v_words[from];
    }
  }
}
