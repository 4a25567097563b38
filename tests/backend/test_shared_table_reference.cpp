// Backend::shared_table builds each table once per key and backend and hands every caller the
// same tensor, so caches of one context share their transform matrices.
#include <doctest/doctest.h>

#include <cstring>

#include "support/test_support.h"

namespace kvc {

TEST_CASE("shared_table builds once per key and returns the same tensor") {
  std::unique_ptr<Backend> backend = Backend::make_cpu();
  int builds = 0;
  auto build = [&] {
    ++builds;
    return std::vector<float>{1.0f, 2.0f, 3.0f};
  };
  Tensor& first = backend->shared_table("a", build);
  Tensor& again = backend->shared_table("a", build);
  Tensor& other = backend->shared_table("b", build);
  CHECK(builds == 2);
  CHECK(&first == &again);
  CHECK(&first != &other);
  REQUIRE(first.bytes() == 12);
  float values[3];
  std::memcpy(values, first.host(), 12);
  CHECK(values[2] == 3.0f);
}

}  // namespace kvc
