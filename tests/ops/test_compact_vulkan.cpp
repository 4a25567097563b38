// Vulkan compaction against the CPU reference: a copy, so byte-equal, poison included.
#include <doctest/doctest.h>

#include "ops/compact.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("compact on Vulkan moves exactly the CPU's bytes") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // The destinations: as long as the sources, shorter (a compacted layer's own storage), exact.
  const ops::CompactShape shapes[] = {{1, 8, 3, 0, 1, 2, 1, Dtype::F32, 3},
                                      {3, 64, 1203, 97, 101, 1000, 32, Dtype::F16, 131},
                                      {2, 128, 5000, 1023, 1023, 4968, 32, Dtype::F32, 1055}};
  for (const ops::CompactShape& shape : shapes) {
    const size_t slots = size_t(shape.num_kv_heads) * shape.slot_stride;
    std::vector<float> k = test::random_floats(slots * shape.head_dim), v = test::random_floats(slots * shape.head_dim);
    const std::vector<unsigned char> k_bytes = test::encode(k, shape.dtype), v_bytes = test::encode(v, shape.dtype);
    std::vector<int32_t> positions(slots);
    for (int32_t& position : positions) position = int32_t(test::rng()() % 100000);
    const std::vector<uint32_t> indices = test::random_index_lists(shape.num_kv_heads, shape.num_selected, shape.index_stride, shape.tail_first);
    std::vector<std::vector<unsigned char>> results;
    for (Backend* backend : {&test::cpu_backend(), gpu}) {
      auto k_in = test::tensor_of(*backend, k_bytes), v_in = test::tensor_of(*backend, v_bytes), p_in = test::tensor_of(*backend, positions);
      auto list = test::tensor_of(*backend, indices);
      const size_t out_slots = size_t(shape.num_kv_heads) * shape.out_slot_stride;
      const size_t out_bytes = out_slots * shape.head_dim * dtype_size(shape.dtype);
      auto k_out = test::make_poisoned(*backend, out_bytes), v_out = test::make_poisoned(*backend, out_bytes);
      auto p_out = test::make_poisoned(*backend, out_slots * 4);
      backend->begin();
      ops::compact(*backend, shape, {view(*list), view(*k_in), view(*v_in), view(*p_in), view(*k_out), view(*v_out), view(*p_out)});
      backend->submit();
      results.push_back(test::read_all(*backend, {k_out.get(), v_out.get(), p_out.get()}));
    }
    INFO("kv heads ", shape.num_kv_heads, " head_dim ", shape.head_dim, " selected ", shape.num_selected, " tail ", shape.tail_length);
    CHECK(results[0] == results[1]);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
