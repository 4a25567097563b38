// Host tensors for the calls: as many elements as the call claims, in the dtype it claims,
// moderate random values with now and then a NaN, an Inf, a huge or a subnormal value put in.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <vector>

#include "kvc/kvc.h"

namespace kvc::fuzz {

struct FuzzedTensor {
  std::vector<unsigned char> bytes;
  bool non_finite = false;  // holds a NaN or an Inf: libkvc must refuse it
  bool extreme = false;     // holds a finite value so large that the attention's maths may overflow

  void* data() { return bytes.data(); }
};

// `elements` values of `dtype` (an unknown dtype is filled as f32).
FuzzedTensor make_tensor(FuzzedDataProvider& data, kvc_dtype dtype, size_t elements);

// Room for `elements` values of `dtype`, every byte set to `poison`: outputs, and the
// deliberately short inputs of calls that must fail before reading them.
std::vector<unsigned char> poisoned_bytes(kvc_dtype dtype, size_t elements, unsigned char poison = 0xA5);

size_t element_bytes(kvc_dtype dtype);

// Whether `bytes` holds only finite values of `dtype`.
bool holds_only_finite(const std::vector<unsigned char>& bytes, kvc_dtype dtype);

}  // namespace kvc::fuzz
