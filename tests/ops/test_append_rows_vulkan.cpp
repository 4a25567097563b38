// Vulkan append against the CPU reference: a copy, so byte-equal, the untouched poison included.
#include <doctest/doctest.h>

#include "ops/append_rows.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("append_rows on Vulkan moves exactly the CPU's bytes") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // One decode token, an odd chunk into the middle of a stride, and a chunk filling a layer.
  const ops::AppendRowsShape shapes[] = {{1, 8, 3, 2, 1, 7, Dtype::F16},
                                         {3, 40, 1203, 97, 333, 97, Dtype::F32},
                                         {8, 128, 2049, 0, 2049, 0, Dtype::F16},
                                         {2, 256, 600, 599, 1, 12345, Dtype::F32}};
  for (const ops::AppendRowsShape& shape : shapes) {
    const size_t row_bytes = shape.head_dim * dtype_size(shape.dtype), slots = size_t(shape.num_kv_heads) * shape.slot_stride;
    std::vector<float> k = test::random_floats(size_t(shape.num_tokens) * shape.num_kv_heads * shape.head_dim);
    std::vector<float> v = test::random_floats(k.size());
    const std::vector<unsigned char> k_bytes = test::encode(k, shape.dtype), v_bytes = test::encode(v, shape.dtype);
    std::vector<std::vector<unsigned char>> results;
    for (Backend* backend : {&test::cpu_backend(), gpu}) {
      auto k_in = test::tensor_of(*backend, k_bytes), v_in = test::tensor_of(*backend, v_bytes);
      auto k_cache = test::make_poisoned(*backend, slots * row_bytes), v_cache = test::make_poisoned(*backend, slots * row_bytes);
      auto positions = test::make_poisoned(*backend, slots * 4);
      backend->begin();
      ops::append_rows(*backend, shape, {view(*k_in), view(*v_in), view(*k_cache), view(*v_cache), view(*positions)});
      backend->submit();
      results.push_back(test::read_all(*backend, {k_cache.get(), v_cache.get(), positions.get()}));
    }
    INFO("kv heads ", shape.num_kv_heads, " head_dim ", shape.head_dim, " tokens ", shape.num_tokens, " at slot ", shape.first_slot);
    CHECK(results[0] == results[1]);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
