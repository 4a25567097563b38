#version 450
// Flash-decoding, pass 1, for a decode step whose token is appended in the same dispatch
// (ops/decode_append.h, kvc_decode_device): workgroups (split < num_splits, kv head, query-head
// block) run decode_split.glsl over the slots before the token's; workgroup (num_splits, kv
// head, block) writes the token's K and V rows and position at slot num_slots (block 0 alone;
// keys rotated to the position where KEYS_ROTATED, as append_rows stores them) and writes the
// token's own partial for each query head of its block, as a split of one slot: m its logit,
// l = 1, the accumulator its value row. attention_merge then combines num_splits + 1 partials.
// No workgroup reads a byte another writes: the splits never reach the token's slot, and the
// query's position comes from the push constants, not from the slot being written. The
// appended rows are bound twice (read-only for the splits, write-only for the token), so the
// splits keep their read-only loads.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

layout(binding = 0) readonly buffer Query { uint q_words[]; };  // [num_q_heads][HEAD_DIM], before RoPE
layout(binding = 1) readonly buffer Keys { uvec4 k_vec[]; };
layout(binding = 1) readonly buffer KeyWords { uint k_words[]; };
layout(binding = 1) readonly buffer KeyHalves { uvec2 k_halves[]; };
layout(binding = 2) readonly buffer Values { uvec4 v_vec[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 5) writeonly buffer Partials { float partials[]; };  // [num_q_heads][num_splits + 1][HEAD_DIM + 2]
layout(binding = 6) readonly buffer TokenKeys { uint token_k_words[]; };    // [num_kv_heads][HEAD_DIM], before RoPE
layout(binding = 7) readonly buffer TokenValues { uint token_v_words[]; };  // [num_kv_heads][HEAD_DIM]
layout(binding = 8) writeonly buffer KeyCache { uint k_cache[]; };          // binding 1's rows
layout(binding = 9) writeonly buffer ValueCache { uint v_cache[]; };        // binding 2's rows
layout(binding = 10) writeonly buffer PositionsOut { int positions_out[]; };  // binding 3's

layout(push_constant) uniform Push {
  uint num_slots;  // before the token's: the token lands at slot num_slots
  uint slot_stride;
  uint num_splits;
  uint group_size;
  float scale;  // 1 / sqrt(HEAD_DIM)
  int token_position;
} push;

#define KVC_DECODE_QUERY_WORDS q_words
#define KVC_DECODE_KEY_VEC k_vec
#define KVC_DECODE_KEY_WORDS k_words
#define KVC_DECODE_KEY_HALVES k_halves
#define KVC_DECODE_VALUE_VEC v_vec
#define KVC_DECODE_POSITIONS positions
#define KVC_DECODE_STORE_LOGIT(index, value)
#define KVC_DECODE_STORE_LOGIT4(index, value)
#define KVC_DECODE_QUERY_POSITION(range) uint(push.token_position)
#include "decode_split.glsl"

const uint ROW_WORDS = KV_F16 ? HEAD_DIM / 2 : HEAD_DIM;

// Element d of the token's key for `kv_head`, rotated to its position where `rotate`: as
// append_rows stores it (`as_stored`: rope_stored_element, then rounded to the cache dtype) or
// as the splits rotate a key they read (key_cos_sin, kept in f32).
float token_key_element(uint kv_head, uint d, bool rotate, bool as_stored) {
  const uint row = kv_head * HEAD_DIM;
  const float x = KVC_LOAD_ELEMENT(token_k_words, KV_F16, row + d);
  if (!rotate || d >= ROTARY_DIMS) return x;
  const RopeDim at = rope_dim(d);
  const float partner = KVC_LOAD_ELEMENT(token_k_words, KV_F16, row + at.partner);
  const uint position = uint(push.token_position);
  if (!as_stored) return rope_rotate_element(x, partner, key_cos_sin(position, turns[at.pair]), at.first);
  const float stored = rope_stored_element(x, partner, position, turns[at.pair], at.first);
  return KV_F16 ? unpackHalf2x16(packHalf2x16(vec2(stored))).x : stored;
}

// The token's workgroup: its rows into the cache, then its partial per query head of the block.
void append_token(uint kv_head, uint q_head0) {
  const uint t = gl_LocalInvocationID.x;
  const uint slot = kv_head * push.slot_stride + push.num_slots;
  if (gl_WorkGroupID.z == 0u) {
    // K as the cache stores it: rotated where KEYS_ROTATED (ROPE_STYLE is then the stored
    // rotation), else as it came.
    for (uint word = t; word < ROW_WORDS; word += WG) {
      const uint source = kv_head * ROW_WORDS + word;
      uint key = token_k_words[source];
      if (KEYS_ROTATED && ROPE_STYLE != 0) {
        key = KV_F16 ? packHalf2x16(vec2(token_key_element(kv_head, 2 * word, true, true), token_key_element(kv_head, 2 * word + 1, true, true)))
                     : floatBitsToUint(token_key_element(kv_head, word, true, true));
      }
      k_cache[slot * ROW_WORDS + word] = key;
      v_cache[slot * ROW_WORDS + word] = token_v_words[source];
    }
    if (t == 0u) positions_out[slot] = push.token_position;
  }

  // Each thread's share of every head's logit, over dims t, t + WG, ...: the key as the
  // splits would read it back (stored rotated, or rotated as read).
  float dots[KVC_MAX_GROUP_BLOCK];
  [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) dots[g] = 0.0;
  const DecodeRange range = DecodeRange(push.num_slots + 1u, push.slot_stride, push.num_splits, push.num_splits,
                                        push.num_splits + 1u, 0u, push.group_size, push.scale);
  for (uint d = t; d < HEAD_DIM; d += WG) {
    const float key = token_key_element(kv_head, d, ROPE_STYLE != 0, KEYS_ROTATED);
    [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) dots[g] += query_element(range, q_head0 + g, d) * key;
  }
  [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) partial_s[g * WG + t] = dots[g];
  barrier();
  if (t < GROUP_BLOCK) {
    float logit = 0.0;
    for (uint i = 0; i < WG; ++i) logit += partial_s[t * WG + i];
    score_s[t] = logit;
  }
  barrier();
  [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) {
    const uint base = ((q_head0 + g) * range.partials_per_head + push.num_splits) * (HEAD_DIM + 2);
    if (t == 0u) {
      partials[base] = score_s[g];
      partials[base + 1] = 1.0;
    }
    for (uint d = t; d < HEAD_DIM; d += WG) partials[base + 2 + d] = KVC_LOAD_ELEMENT(token_v_words, KV_F16, kv_head * HEAD_DIM + d);
  }
}

void main() {
  const uint kv_head = gl_WorkGroupID.y;
  if (gl_WorkGroupID.x == push.num_splits) {
    append_token(kv_head, kv_head * push.group_size + gl_WorkGroupID.z * GROUP_BLOCK);
    return;
  }
  decode_split(DecodeRange(push.num_slots, push.slot_stride, gl_WorkGroupID.x, push.num_splits, push.num_splits + 1u, 0u,
                           push.group_size, push.scale));
}
