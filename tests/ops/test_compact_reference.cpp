// The CPU compaction against its definition: destination slot s of a kv head holds source
// slot indices[s] for s < num_selected, then the tail in order; K, V and position together.
#include <doctest/doctest.h>

#include "ops/compact.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("compact_cpu gathers the selected slots, then the tail, in order") {
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    const ops::CompactShape shape{2, 8, 30, 5, 7, 20, 4, dtype, 11};  // into shorter storage, as a compacted layer
    const size_t row_bytes = shape.head_dim * dtype_size(dtype), slots = size_t(shape.num_kv_heads) * shape.slot_stride;
    const size_t out_slots = size_t(shape.num_kv_heads) * shape.out_slot_stride;
    std::vector<float> k = test::random_floats(slots * shape.head_dim), v = test::random_floats(slots * shape.head_dim);
    const std::vector<unsigned char> k_bytes = test::encode(k, dtype), v_bytes = test::encode(v, dtype);
    std::vector<int32_t> positions(slots);
    for (size_t i = 0; i < slots; ++i) positions[i] = int32_t(1000 + 3 * i);
    const std::vector<uint32_t> indices = test::random_index_lists(shape.num_kv_heads, shape.num_selected, shape.index_stride, shape.tail_first);
    Backend& cpu = test::cpu_backend();
    auto k_in = test::tensor_of(cpu, k_bytes), v_in = test::tensor_of(cpu, v_bytes), p_in = test::tensor_of(cpu, positions);
    auto list = test::tensor_of(cpu, indices);
    auto k_out = test::make_poisoned(cpu, out_slots * row_bytes), v_out = test::make_poisoned(cpu, out_slots * row_bytes);
    auto p_out = test::make_poisoned(cpu, out_slots * 4);
    ops::compact(cpu, shape, {view(*list), view(*k_in), view(*v_in), view(*p_in), view(*k_out), view(*v_out), view(*p_out)});
    const auto k_got = test::read_as<unsigned char>(cpu, *k_out, out_slots * row_bytes);
    const auto v_got = test::read_as<unsigned char>(cpu, *v_out, out_slots * row_bytes);
    const auto p_got = test::read_as<int32_t>(cpu, *p_out, out_slots);
    for (uint32_t head = 0; head < shape.num_kv_heads; ++head)
      for (uint32_t s = 0; s < shape.num_selected + shape.tail_length; ++s) {
        const uint32_t source = s < shape.num_selected ? indices[head * shape.index_stride + s] : shape.tail_first + s - shape.num_selected;
        const size_t to = size_t(head) * shape.out_slot_stride + s, from = size_t(head) * shape.slot_stride + source;
        INFO(std::string(dtype_name(dtype)), " head ", head, " slot ", s);
        CHECK(p_got[to] == positions[from]);
        CHECK(std::equal(k_got.begin() + to * row_bytes, k_got.begin() + (to + 1) * row_bytes, k_bytes.begin() + from * row_bytes));
        CHECK(std::equal(v_got.begin() + to * row_bytes, v_got.begin() + (to + 1) * row_bytes, v_bytes.begin() + from * row_bytes));
      }
  }
}

}  // namespace kvc
