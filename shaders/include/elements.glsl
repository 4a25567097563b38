// Reading and writing f32 or f16 elements of storage buffers declared as uint words.
// f16 uses unpack/packHalf2x16 so no 16-bit storage feature is needed on any device.

#define KVC_LOAD_ELEMENT(words, is_f16, index) \
  ((is_f16) ? unpackHalf2x16(words[(index) >> 1])[(index) & 1u] : uintBitsToFloat(words[index]))

// Four consecutive elements starting at a multiple of 4.
#define KVC_LOAD_VEC4(words, is_f16, index)                                                          \
  ((is_f16) ? vec4(unpackHalf2x16(words[((index) >> 1)]), unpackHalf2x16(words[((index) >> 1) + 1u])) \
            : uintBitsToFloat(uvec4(words[index], words[(index) + 1u], words[(index) + 2u], words[(index) + 3u])))

// Score of a masked slot: -FLT_MAX, so exp(score - max) is exactly 0 and no Inf arithmetic occurs.
const float KVC_NEG_INF = -3.402823466e+38;

// Register arrays are sized by these fixed bounds, never by specialization constants: a
// spec-constant-sized array may be placed in local memory (on the H100 it made decode
// attention latency-bound, ~25x slower than its instruction count). Loops still run to the
// specialised bounds, so the unused tail is dead code.
const uint KVC_MAX_GROUP_BLOCK = 8;  // query heads per decode workgroup
const uint KVC_MAX_CHUNKS = 64;      // 4-element chunks of a row: head_dim <= 256

// An f32's bits mapped to a uint that orders as the float does (negative values flipped
// whole, positive ones above them); -0 maps as +0, so that the CPU's comparisons of values
// (where -0 == +0) and the GPU's of keys see the same ties.
uint kvc_ordered_key(uint bits) {
  if (bits == 0x80000000u) bits = 0u;
  return (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
}
