// size_product and require_within at the 2^31, 2^32 and 2^64 boundaries.
#include <doctest/doctest.h>

#include <string>

#include "common/size_limits.h"

namespace kvc {

TEST_CASE("size_product is exact up to 2^64 - 1 and saturates past it") {
  CHECK(size_product({1u << 16, 1u << 15}) == uint64_t(1) << 31);
  CHECK(size_product({1u << 16, 1u << 16}) == uint64_t(1) << 32);
  CHECK(size_product({UINT32_MAX, 2}) == (uint64_t(1) << 33) - 2);
  CHECK(size_product({uint64_t(1) << 32, (uint64_t(1) << 32) - 1}) == UINT64_MAX - UINT32_MAX);
  CHECK(size_product({uint64_t(1) << 32, uint64_t(1) << 32}) == kSizeOverflow);
  // Wrapping would give 0 here, and 2^64 + 2^33 would wrap to 2^33: both must saturate.
  CHECK(size_product({uint64_t(1) << 40, 1u << 12, 1u << 12}) == kSizeOverflow);
  CHECK(size_product({(uint64_t(1) << 32) + 2, uint64_t(1) << 32}) == kSizeOverflow);
  CHECK(size_product({uint64_t(1) << 63, 2, 0}) == 0);
  CHECK(size_product({}) == 1);
}

TEST_CASE("require_within refuses past the limit with KVC_ERROR_CAPACITY, naming it") {
  const SizeLimit binding{UINT32_MAX, "maxStorageBufferRange"};
  CHECK_NOTHROW(require_within(UINT32_MAX, binding, "", [] { return std::string("K"); }));
  for (uint64_t bytes : {uint64_t(1) << 32, size_product({uint64_t(1) << 32, uint64_t(1) << 32})}) {
    try {
      require_within(bytes, binding, "lower capacity", [] { return std::string("one layer's K"); });
      FAIL("accepted ", bytes, " bytes");
    } catch (const Error& error) {
      const std::string message = error.what();
      INFO(message);
      CHECK(error.status() == KVC_ERROR_CAPACITY);
      CHECK(message.find("one layer's K") != std::string::npos);
      CHECK(message.find("maxStorageBufferRange") != std::string::npos);
      CHECK(message.find(std::to_string(UINT32_MAX)) != std::string::npos);
      CHECK(message.find("lower capacity") != std::string::npos);
      CHECK(message.find(bytes == kSizeOverflow ? "2^64 - 1" : "4294967296") != std::string::npos);
    }
  }
}

}  // namespace kvc
