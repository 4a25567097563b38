// The Vulkan TreeKV prefill against the CPU reference on random shapes (odd head counts,
// blocks, windows; slots in random order), f32 and f16: the same tokens in the same slots,
// bit for bit (both compute the block scores in the same f32 operations and order).
#include <doctest/doctest.h>

#include "support/test_support.h"
#include "support/tree_prefill_case.h"

namespace kvc {

TEST_CASE("tree_prefill on Vulkan equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (int trial = 0; trial < 12; ++trial) {
      const test::TreePrefillCase c = test::TreePrefillCase::random(dtype);
      INFO(std::string(dtype_name(dtype)), " trial ", trial, " held ", c.shape.slots_held, " c ", c.shape.capacity, " b ", c.shape.block);
      CHECK(c.run(*gpu) == c.run(test::cpu_backend()));
    }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
