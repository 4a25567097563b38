// Vulkan max pooling against the CPU reference: a maximum is exact, so the outputs are equal.
#include <doctest/doctest.h>

#include "ops/max_pool.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("max_pool on Vulkan equals the CPU reference exactly") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (uint32_t kernel : {1u, 7u, 9u})
    for (uint32_t length : {1u, 6u, 257u, 32771u}) {
      const ops::MaxPoolShape shape{5, length, kernel};
      const std::vector<float> in = test::random_floats(size_t(shape.num_rows) * length, 0.0f, 1.0f);
      std::vector<std::vector<float>> results;
      for (Backend* backend : {&test::cpu_backend(), gpu}) {
        auto input = test::tensor_of(*backend, in);
        auto output = test::make_poisoned(*backend, in.size() * 4);
        backend->begin();
        ops::max_pool(*backend, shape, {view(*input), view(*output)});
        backend->submit();
        results.push_back(test::read_as<float>(*backend, *output, in.size()));
      }
      INFO("kernel ", kernel, " length ", length);
      CHECK(results[0] == results[1]);
    }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
