// The NaN/Inf check of host inputs: one pass at memory speed. The test is on the exponent bits
// (all ones means NaN or Inf in f32 and f16 alike), folded branch-free over blocks so the
// compiler vectorises it; only a block that holds one is searched again for its index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/dtype.h"

namespace kvc {

// The first of `count` words whose exponent bits are at least `exponent_floor`, or `count`.
template <typename Word>
size_t first_exponent_at_least(const Word* words, size_t count, Word exponent_mask, Word exponent_floor) {
  constexpr size_t kBlock = 4096;
  for (size_t first = 0; first < count; first += kBlock) {
    const size_t last = std::min(count, first + kBlock);
    Word any = 0;
    for (size_t i = first; i < last; ++i) any |= Word((words[i] & exponent_mask) >= exponent_floor);
    if (!any) continue;
    for (size_t i = first; i < last; ++i)
      if ((words[i] & exponent_mask) >= exponent_floor) return i;
  }
  return count;
}

// The index of the first NaN or Inf among `count` elements of `dtype`, or `count` if none.
inline size_t first_non_finite(const void* data, Dtype dtype, size_t count) {
  if (dtype == Dtype::F32) return first_exponent_at_least(static_cast<const uint32_t*>(data), count, 0x7f800000u, 0x7f800000u);
  return first_exponent_at_least(static_cast<const uint16_t*>(data), count, uint16_t(0x7c00u), uint16_t(0x7c00u));
}

// The index of the first element of magnitude 2^(E - 1) or more, E the dtype's largest
// exponent (32768 in f16, 2^127 in f32), or `count` if none. Below it a pair's norm is under
// sqrt(2) 2^(E - 1) < 2^E: any rotation of the pair stays finite in the dtype.
inline size_t first_rotation_candidate(const void* data, Dtype dtype, size_t count) {
  if (dtype == Dtype::F32) return first_exponent_at_least(static_cast<const uint32_t*>(data), count, 0x7f800000u, 0x7f000000u);
  return first_exponent_at_least(static_cast<const uint16_t*>(data), count, uint16_t(0x7c00u), uint16_t(0x7800u));
}

}  // namespace kvc
