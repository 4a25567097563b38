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
