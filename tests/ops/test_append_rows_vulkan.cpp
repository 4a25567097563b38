// Vulkan append against the CPU reference: a copy, so byte-equal, the untouched poison included;
// with RoPE, keys within the rounding that separates the two rotations.
#include <doctest/doctest.h>

#include <cmath>

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

TEST_CASE("append_rows on Vulkan with RoPE rotates keys as the CPU does") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  struct Case {
    ops::AppendRowsShape shape;
    kvc_rope_style style;
    uint32_t rotary_dims;
  };
  // Positions past 2^20 (the angle reduced in integers), partial rotary dims, f16 words whose
  // two elements rotate with partners in other words (NeoX) or with each other (interleaved).
  const Case cases[] = {{{1, 8, 3, 2, 1, 7, Dtype::F16}, KVC_ROPE_NEOX, 8},
                        {{3, 40, 1203, 97, 333, 1234567, Dtype::F32}, KVC_ROPE_INTERLEAVED, 24},
                        {{8, 128, 2049, 0, 2049, 0, Dtype::F16}, KVC_ROPE_NEOX, 128},
                        {{2, 64, 600, 599, 1, 2000000000, Dtype::F16}, KVC_ROPE_INTERLEAVED, 64},
                        {{2, 96, 300, 11, 77, 5, Dtype::F32}, KVC_ROPE_NEOX, 32}};
  for (const Case& c : cases) {
    ops::AppendRowsShape shape = c.shape;
    shape.rope = {c.style, c.rotary_dims, 10000.0};
    const size_t row_bytes = shape.head_dim * dtype_size(shape.dtype), slots = size_t(shape.num_kv_heads) * shape.slot_stride;
    std::vector<float> k = test::random_floats(size_t(shape.num_tokens) * shape.num_kv_heads * shape.head_dim);
    std::vector<float> v = test::random_floats(k.size());
    const std::vector<unsigned char> k_bytes = test::encode(k, shape.dtype), v_bytes = test::encode(v, shape.dtype);
    const std::vector<uint32_t> turns = ops::rope_turn_table(shape.rope);
    std::vector<std::vector<float>> keys;
    std::vector<std::vector<unsigned char>> rest;
    for (Backend* backend : {&test::cpu_backend(), gpu}) {
      auto k_in = test::tensor_of(*backend, k_bytes), v_in = test::tensor_of(*backend, v_bytes);
      auto k_cache = test::make_poisoned(*backend, slots * row_bytes), v_cache = test::make_poisoned(*backend, slots * row_bytes);
      auto positions = test::make_poisoned(*backend, slots * 4);
      auto turn_table = test::make_tensor(*backend, turns.data(), turns.size() * 4);
      backend->begin();
      ops::append_rows(*backend, shape,
                       {view(*k_in), view(*v_in), view(*k_cache), view(*v_cache), view(*positions), view(*turn_table)});
      backend->submit();
      keys.push_back(test::decode(test::read_tensor(*backend, *k_cache, slots * row_bytes), shape.dtype));
      rest.push_back(test::read_all(*backend, {v_cache.get(), positions.get()}));
    }
    INFO("kv heads ", shape.num_kv_heads, " head_dim ", shape.head_dim, " tokens ", shape.num_tokens, " at slot ", shape.first_slot,
         " position ", shape.first_position, " style ", c.style, " rotary dims ", c.rotary_dims);
    CHECK(rest[0] == rest[1]);
    // A rotated element is x cos - y sin (or x sin + y cos) of its pair (x, y). The GPU's cos
    // and sin (error < 3e-8) and f32 products err by a few 2^-24 of the pair's magnitude, not of
    // the element, which may be near zero: 1e-6 of the magnitude bounds it. f16 adds each
    // side's rounding of the element: half an ulp each, 2^-11 of it for a normal value, and a
    // fixed 2^-25 below 2^-14, where f16's subnormals are 2^-24 apart (a CPU and a GPU value
    // one subnormal apart failed the relative bound alone in CI).
    const bool f16 = shape.dtype == Dtype::F16;
    const double element_rounding = f16 ? 0x1p-10 : 0.0, subnormal_rounding = f16 ? 0x1p-24 : 0.0;
    const uint32_t dim = shape.head_dim, half_rotary = c.rotary_dims / 2;
    for (size_t i = 0; i < keys[0].size(); ++i) {
      const bool poison = std::isnan(keys[0][i]);
      CHECK(std::isnan(keys[1][i]) == poison);  // slots outside the chunk untouched
      if (poison) continue;
      const uint32_t d = uint32_t(i % dim);
      if (d >= c.rotary_dims) {
        CHECK(keys[0][i] == keys[1][i]);  // stored as it came
        continue;
      }
      const uint32_t partner = c.style == KVC_ROPE_NEOX ? (d < half_rotary ? d + half_rotary : d - half_rotary) : d ^ 1u;
      const double magnitude = std::hypot(keys[0][i], keys[0][i - d + partner]);
      CHECK(std::fabs(keys[0][i] - keys[1][i]) <= element_rounding * std::fabs(keys[0][i]) + subnormal_rounding + 1e-6 * magnitude);
    }
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
