// Reading keys as attention sees them: 4 consecutive elements of a stored (pre-RoPE) key row,
// rotated to the position the slot carries. The includer declares k_words[] (the keys as
// words), turns[] (rope_turn_table), and the constants KV_F16, HEAD_DIM, ROPE_STYLE, ROTARY_DIMS.

vec4 key_chunk(uint row_element, uint c, uint position) {
  vec4 x = KVC_LOAD_VEC4(k_words, KV_F16, row_element + c);
  if (ROPE_STYLE == 0 || c >= ROTARY_DIMS) return x;
  if (ROPE_STYLE == 2) {  // interleaved: the chunk holds pairs c/2 and c/2 + 1
    const vec2 a = rope_rotate(x.xy, rope_cos_sin(position, turns[c / 2]));
    const vec2 b = rope_rotate(x.zw, rope_cos_sin(position, turns[c / 2 + 1]));
    return vec4(a, b);
  }
  // NeoX: dim d < R/2 pairs with d + R/2; its partner chunk is R/2 away.
  const uint half_dims = ROTARY_DIMS / 2;
  const bool low = c < half_dims;
  const vec4 partner = KVC_LOAD_VEC4(k_words, KV_F16, row_element + (low ? c + half_dims : c - half_dims));
  const uint first_pair = low ? c : c - half_dims;
  vec4 y;
  for (uint e = 0; e < 4; ++e) {
    const vec2 cs = rope_cos_sin(position, turns[first_pair + e]);
    y[e] = rope_rotate_element(x[e], partner[e], cs, low);
  }
  return y;
}
