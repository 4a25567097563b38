// The Vulkan copy op against the CPU one on random bytes of several sizes and offsets.
#include <doctest/doctest.h>

#include "ops/copy.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("copy on Vulkan equals the CPU copy, offsets and sizes past one dispatch included") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (size_t bytes : {size_t(16), size_t(48), size_t(4096 + 16), size_t(17) << 20}) {
    std::vector<unsigned char> data(bytes + 256);
    for (unsigned char& byte : data) byte = static_cast<unsigned char>(test::rng()());
    auto src = test::make_tensor(*gpu, data.data(), data.size());
    auto dst = test::make_poisoned(*gpu, data.size());
    gpu->begin();
    ops::copy(*gpu, {View{src.get(), 256}, View{dst.get(), 0}, bytes});
    gpu->submit();
    const std::vector<unsigned char> copied = test::read_tensor(*gpu, *dst, bytes);
    INFO("bytes ", bytes);
    CHECK(std::equal(copied.begin(), copied.end(), data.begin() + 256));
  }
}

}  // namespace kvc
