// make_parts on Vulkan (and on the CPU, where each part is its own allocation): parts of odd
// sizes neither overlap nor lose their bytes, bind at offsets the device accepts, and keep their
// allocation while any one of them lives.
#include <doctest/doctest.h>

#include "support/selection_support.h"
#include "vulkan/buffer.h"

namespace kvc {
namespace {

void check_parts(Backend& backend) {
  const std::vector<size_t> sizes{4 * 1001, 4 * 3, 4 * 777};
  std::vector<std::shared_ptr<Tensor>> parts = make_parts(backend, sizes);
  REQUIRE(parts.size() == sizes.size());
  std::vector<std::vector<uint32_t>> written;
  for (size_t i = 0; i < parts.size(); ++i) {
    CHECK(parts[i]->bytes() == sizes[i]);
    std::vector<uint32_t> values(sizes[i] / 4);
    for (uint32_t& value : values) value = test::rng()();
    backend.begin();
    backend.upload(values.data(), sizes[i], *parts[i], 0);
    backend.submit();
    written.push_back(values);
  }
  for (size_t i = 0; i < parts.size(); ++i) CHECK(test::read_as<uint32_t>(backend, *parts[i], sizes[i] / 4) == written[i]);
  if (!backend.is_cpu()) {
    const vk::BufferSlice first = parts[0]->slice(0, sizes[0]);
    for (const auto& part : parts) {
      const vk::BufferSlice slice = part->slice(0, part->bytes());
      CHECK(slice.buffer == first.buffer);  // one allocation
      CHECK(slice.offset % kPartAlignment == 0);
    }
  }
  parts[0].reset();  // the others keep the allocation
  parts[1].reset();
  CHECK(test::read_as<uint32_t>(backend, *parts[2], sizes[2] / 4) == written[2]);
}

}  // namespace

TEST_CASE("make_parts: one allocation, parts apart and aligned, kept while one lives") {
  check_parts(test::cpu_backend());
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  check_parts(*gpu);
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
