// The CPU max pooling against its definition: out[i] = max in[j] over |i - j| <= r inside the row.
#include <doctest/doctest.h>

#include "ops/max_pool.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("max_pool_cpu equals the windowed maximum, same padding at both ends") {
  for (uint32_t kernel : {1u, 3u, 7u})
    for (uint32_t length : {1u, 2u, 5u, 13u}) {
      const uint32_t rows = 3;
      const std::vector<float> in = test::random_floats(size_t(rows) * length, 0.0f, 1.0f);
      auto input = test::tensor_of(test::cpu_backend(), in);
      auto output = test::make_poisoned(test::cpu_backend(), in.size() * 4);
      ops::max_pool_cpu({rows, length, kernel}, {view(*input), view(*output)});
      const std::vector<float> out = test::read_as<float>(test::cpu_backend(), *output, in.size());
      const int radius = int(kernel / 2);
      for (uint32_t row = 0; row < rows; ++row)
        for (int i = 0; i < int(length); ++i) {
          float expected = -1.0f;
          for (int j = 0; j < int(length); ++j)
            if (std::abs(i - j) <= radius) expected = std::max(expected, in[row * length + j]);
          INFO("kernel ", kernel, " length ", length, " row ", row, " i ", i);
          CHECK(out[row * length + i] == expected);
        }
    }
}

}  // namespace kvc
