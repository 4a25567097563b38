// Storage dtypes and the f16 <-> f32 conversions the CPU backend and the tests share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvc/kvc.h"

namespace kvc {

enum class Dtype : uint32_t { F32 = KVC_DTYPE_F32, F16 = KVC_DTYPE_F16 };

inline size_t dtype_size(Dtype dtype) { return dtype == Dtype::F32 ? 4 : 2; }
inline const char* dtype_name(Dtype dtype) { return dtype == Dtype::F32 ? "f32" : "f16"; }

// IEEE binary16 with round-to-nearest-even, as GLSL's packHalf2x16 does on the devices we run.
inline uint16_t float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u));
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to Inf
  if (abs_bits < 0x38800000u) {                                               // subnormal or zero
    if (abs_bits < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - (abs_bits >> 23);  // value / 2^-24 = mantissa >> shift
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs_bits - 0x38000000u) >> 13);
  const uint32_t rest = abs_bits & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float half_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; mantissa <<= 1; } while ((mantissa & 0x400u) == 0);
      bits = sign | ((112u - e) << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// Element `index` of a dense array of `dtype`, as float.
inline float load_element(const void* data, Dtype dtype, size_t index) {
  if (dtype == Dtype::F32) return static_cast<const float*>(data)[index];
  return half_to_float(static_cast<const uint16_t*>(data)[index]);
}

inline void store_element(void* data, Dtype dtype, size_t index, float value) {
  if (dtype == Dtype::F32) static_cast<float*>(data)[index] = value;
  else static_cast<uint16_t*>(data)[index] = float_to_half(value);
}

}  // namespace kvc
