// Sizes (elements, bytes) multiplied in 64 bits with overflow caught, and checked against a
// named limit. A product past 2^64 - 1 saturates at kSizeOverflow, so it fails every limit
// check instead of wrapping to a small size that would pass one; on a 32-bit host the limit of
// anything held in host memory is size_t's 2^32, so 64-bit products matter there too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/error.h"

namespace kvc {

inline constexpr uint64_t kSizeOverflow = UINT64_MAX;

// The product of `factors`, or kSizeOverflow when it passes 2^64 - 1.
inline uint64_t size_product(std::initializer_list<uint64_t> factors) {
  uint64_t product = 1;
  bool overflowed = false;
  for (uint64_t factor : factors) {
    if (factor == 0) return 0;
    overflowed = overflowed || product > kSizeOverflow / factor;
    product *= factor;
  }
  return overflowed ? kSizeOverflow : product;
}

// The most bytes one thing may take, and what sets that limit ("maxStorageBufferRange").
struct SizeLimit {
  uint64_t bytes;
  const char* name;
};

// What one tensor in host memory may take: what size_t counts.
inline constexpr SizeLimit kHostSizeLimit{SIZE_MAX, "the host's size_t"};

// "N bytes", or "more than 2^64 - 1 bytes" for a product that overflowed.
inline std::string bytes_text(uint64_t bytes) {
  return bytes == kSizeOverflow ? std::string("more than 2^64 - 1 bytes") : std::to_string(bytes) + " bytes";
}

// Throws Error(KVC_ERROR_CAPACITY) unless `bytes` is within `limit`; the message says what
// takes them (`describe()`, built only on failure), how many, the limit, what sets it and
// what the caller can do (`remedy`, may be empty).
template <typename Describe>
void require_within(uint64_t bytes, const SizeLimit& limit, const char* remedy, Describe&& describe) {
  require(bytes <= limit.bytes, KVC_ERROR_CAPACITY, [&] {
    return describe() + " is " + bytes_text(bytes) + ", more than the " + std::to_string(limit.bytes) + " bytes " + limit.name +
           " allows" + (*remedy ? std::string(": ") + remedy : std::string());
  });
}

}  // namespace kvc
