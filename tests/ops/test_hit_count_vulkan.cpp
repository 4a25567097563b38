// Vulkan hit counting against the CPU reference: integer counts, so equal exactly.
#include <doctest/doctest.h>

#include "ops/hit_count.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("hit_count on Vulkan equals the CPU reference exactly") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const ops::HitCountShape shapes[] = {{1, 1, 1, 1, 1}, {2, 12, 37, 40, 101}, {3, 96, 300, 300, 1000}};
  for (const ops::HitCountShape& shape : shapes) {
    const std::vector<uint32_t> indices = test::random_index_lists(size_t(shape.num_kv_heads) * shape.rows_per_kv_head,
                                                                     shape.hits_per_row, shape.index_stride, shape.num_keys);
    std::vector<std::vector<uint32_t>> results;
    for (Backend* backend : {&test::cpu_backend(), gpu}) {
      auto named = test::tensor_of(*backend, indices);
      auto counts = test::make_poisoned(*backend, size_t(shape.num_kv_heads) * shape.num_keys * 4);
      backend->begin();
      ops::hit_count(*backend, shape, {view(*named), view(*counts)});
      backend->submit();
      results.push_back(test::read_as<uint32_t>(*backend, *counts, size_t(shape.num_kv_heads) * shape.num_keys));
    }
    INFO("kv heads ", shape.num_kv_heads, " rows ", shape.rows_per_kv_head, " K ", shape.hits_per_row);
    CHECK(results[0] == results[1]);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
