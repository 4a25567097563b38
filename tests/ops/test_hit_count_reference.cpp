// The CPU hit count against Eq. 1's numerator: for each key, the number of its kv head's
// rows whose top-K list names it.
#include <doctest/doctest.h>

#include "ops/hit_count.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("hit_count_cpu counts, per kv head, the rows that name each key") {
  const ops::HitCountShape shape{3, 5, 4, 6, 11};
  const std::vector<uint32_t> indices = test::random_index_lists(size_t(shape.num_kv_heads) * shape.rows_per_kv_head,
                                                                   shape.hits_per_row, shape.index_stride, shape.num_keys);
  auto named = test::tensor_of(test::cpu_backend(), indices);
  auto counts = test::make_poisoned(test::cpu_backend(), size_t(shape.num_kv_heads) * shape.num_keys * 4);
  ops::hit_count_cpu(shape, {view(*named), view(*counts)});
  const std::vector<uint32_t> got = test::read_as<uint32_t>(test::cpu_backend(), *counts, size_t(shape.num_kv_heads) * shape.num_keys);
  for (uint32_t kv = 0; kv < shape.num_kv_heads; ++kv)
    for (uint32_t key = 0; key < shape.num_keys; ++key) {
      uint32_t expected = 0;
      for (uint32_t row = 0; row < shape.rows_per_kv_head; ++row) {
        const auto first = indices.begin() + (size_t(kv) * shape.rows_per_kv_head + row) * shape.index_stride;
        expected += std::find(first, first + shape.hits_per_row, key) != first + shape.hits_per_row;
      }
      CHECK(got[kv * shape.num_keys + key] == expected);
    }
}

}  // namespace kvc
