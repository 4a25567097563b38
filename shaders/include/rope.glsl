// RoPE helpers shared by the kernels that rotate keys or queries.
// The includer defines ROPE_STYLE (0 none, 1 NeoX halves, 2 interleaved pairs) and ROTARY_DIMS.

#include "quadrant_trig.glsl"

// cos and sin of position * inv_freq, where `turn` is inv_freq / (2 pi) as a 64-bit fixed-point
// fraction of a turn (see rope_turn_table). The product is reduced modulo one turn in integer
// arithmetic, so the angle stays exact for any position; then a quarter-turn reduction and
// kvc_quadrant_cos_sin.
vec2 rope_cos_sin(uint position, uvec2 turn) {
  uint carry, low;
  umulExtended(position, turn.y, carry, low);
  const uint fraction = position * turn.x + carry;  // angle in turns, 2^-32 resolution
  const uint quadrant = (fraction + 0x20000000u) >> 30;
  const int rest = int(fraction - (quadrant << 30));
  return kvc_quadrant_cos_sin(kvc_turn_angle(rest), quadrant);
}

// rope_cos_sin by the built-ins, on the same exact reduction to [-pi, pi): a fraction of the
// polynomial's instructions, for devices whose built-ins measured precise there
// (vulkan/trig_precision.h; the callers pass a specialization constant).
vec2 rope_cos_sin_builtin(uint position, uvec2 turn) {
  uint carry, low;
  umulExtended(position, turn.y, carry, low);
  const float angle = kvc_turn_angle(int(position * turn.x + carry));
  return vec2(cos(angle), sin(angle));
}

// The dims rotated together as pair `pair`.
uvec2 rope_pair_dims(uint pair) {
  return ROPE_STYLE == 1 ? uvec2(pair, pair + ROTARY_DIMS / 2) : uvec2(2 * pair, 2 * pair + 1);
}

// Where dim d (< ROTARY_DIMS) sits: its rotary pair, the dim of the pair's other element, and
// whether d is the pair's first (its cos term keeps the sign).
struct RopeDim {
  uint pair;
  uint partner;
  bool first;
};

RopeDim rope_dim(uint d) {
  if (ROPE_STYLE == 2) return RopeDim(d / 2, d ^ 1u, (d & 1u) == 0);
  const uint half_dims = ROTARY_DIMS / 2;
  const bool first = d < half_dims;
  return RopeDim(first ? d : d - half_dims, first ? d + half_dims : d - half_dims, first);
}

// A key element as a cache stores it rotated to `position` (append_rows, and
// attention_decode_append's token): evaluated as written, with no contraction into fused
// multiply-adds left to each pipeline's compiler, so that every kernel that stores a rotated key
// stores the same bits.
float rope_stored_element(float x, float partner, uint position, uvec2 turn, bool first) {
  const vec2 cs = rope_cos_sin(position, turn);
  precise float rotated = first ? x * cs.x - partner * cs.y : partner * cs.y + x * cs.x;
  return rotated;
}

// One element of a rotated pair: x is the element, partner the other element of its pair,
// first whether x is the pair's first (its cos term keeps the sign).
float rope_rotate_element(float x, float partner, vec2 cos_sin, bool first) {
  return first ? x * cos_sin.x - partner * cos_sin.y : partner * cos_sin.y + x * cos_sin.x;
}

vec2 rope_rotate(vec2 x, vec2 cos_sin) {
  return vec2(x.x * cos_sin.x - x.y * cos_sin.y, x.x * cos_sin.y + x.y * cos_sin.x);
}
