#include "tensors.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "common/dtype.h"

namespace kvc::fuzz {
namespace {

// splitmix64: values from a seed the input chooses, so one input byte does not have to feed
// each of thousands of elements.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

enum class Special { Nan, Inf, NegativeInf, Huge, Subnormal, NegativeZero, Count };

float special_value(Special kind, kvc_dtype dtype) {
  const bool half = dtype == KVC_DTYPE_F16;
  switch (kind) {
    case Special::Nan: return std::numeric_limits<float>::quiet_NaN();
    case Special::Inf: return std::numeric_limits<float>::infinity();
    case Special::NegativeInf: return -std::numeric_limits<float>::infinity();
    case Special::Huge: return half ? 65504.0f : std::numeric_limits<float>::max();
    case Special::Subnormal: return half ? 5.96e-8f : std::numeric_limits<float>::denorm_min();
    default: return -0.0f;
  }
}

void store(std::vector<unsigned char>& bytes, kvc_dtype dtype, size_t index, float value) {
  if (dtype == KVC_DTYPE_F16) {
    const uint16_t half = float_to_half(value);
    std::memcpy(bytes.data() + index * 2, &half, 2);
  } else {
    std::memcpy(bytes.data() + index * 4, &value, 4);
  }
}

float load(const std::vector<unsigned char>& bytes, kvc_dtype dtype, size_t index) {
  if (dtype == KVC_DTYPE_F16) {
    uint16_t half;
    std::memcpy(&half, bytes.data() + index * 2, 2);
    return half_to_float(half);
  }
  float value;
  std::memcpy(&value, bytes.data() + index * 4, 4);
  return value;
}

}  // namespace

size_t element_bytes(kvc_dtype dtype) { return dtype == KVC_DTYPE_F16 ? 2 : 4; }

std::vector<unsigned char> poisoned_bytes(kvc_dtype dtype, size_t elements, unsigned char poison) {
  return std::vector<unsigned char>(elements * element_bytes(dtype), poison);
}

bool holds_only_finite(const std::vector<unsigned char>& bytes, kvc_dtype dtype) {
  const size_t count = bytes.size() / element_bytes(dtype);
  for (size_t i = 0; i < count; ++i)
    if (!std::isfinite(load(bytes, dtype, i))) return false;
  return true;
}

FuzzedTensor make_tensor(FuzzedDataProvider& data, kvc_dtype dtype, size_t elements) {
  FuzzedTensor tensor;
  tensor.bytes.resize(elements * element_bytes(dtype));
  uint64_t state = data.ConsumeIntegral<uint32_t>();
  // [-4, 4]: peaked enough for softmax to matter, far from any overflow
  for (size_t i = 0; i < elements; ++i) store(tensor.bytes, dtype, i, float(next_random(state) >> 40) / float(1 << 21) - 4.0f);
  // One or two specials one time in four; an index hit twice holds the last, so the flags
  // are taken from what the tensor ends up holding.
  const uint8_t drawn = elements ? data.ConsumeIntegralInRange<uint8_t>(0, 7) : 0;
  std::vector<size_t> special_indices;
  for (uint8_t n = 0; n < drawn && drawn <= 2; ++n) {
    const auto kind = static_cast<Special>(data.ConsumeIntegralInRange<int>(0, int(Special::Count) - 1));
    special_indices.push_back(data.ConsumeIntegralInRange<size_t>(0, elements - 1));
    store(tensor.bytes, dtype, special_indices.back(), special_value(kind, dtype));
  }
  for (size_t index : special_indices) {
    const float value = load(tensor.bytes, dtype, index);
    tensor.non_finite = tensor.non_finite || !std::isfinite(value);
    tensor.extreme = tensor.extreme || (std::isfinite(value) && std::fabs(value) > 1e4f);
  }
  return tensor;
}

}  // namespace kvc::fuzz
