// The Vulkan RoPE against the CPU reference, for both styles, partial rotary dims, f32 and
// f16 input and output, positions up to 2^24 (where a float angle would have lost all
// precision), and input and positions at offsets below a binding's alignment.
#include <doctest/doctest.h>

#include "ops/rope.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("rope on Vulkan equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  std::uniform_int_distribution<int32_t> position(0, 1 << 24);
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (Dtype out_dtype : {Dtype::F32, Dtype::F16})
      for (kvc_rope_style style : {KVC_ROPE_NEOX, KVC_ROPE_INTERLEAVED, KVC_ROPE_NONE})
        for (uint32_t head_dim : {8u, 64u, 96u, 128u})
          for (uint32_t rotary_dims : {8u, head_dim}) {
            const uint32_t tokens = 1 + test::rng()() % 37, heads = 1 + test::rng()() % 5;
            ops::RopeShape shape{tokens, heads, head_dim, dtype, {style, rotary_dims, 500000.0}, 0.125f, out_dtype};
            std::vector<float> input = test::random_floats(size_t(tokens) * heads * head_dim);
            // Four elements before the rows: the input starts 8 bytes (f16) or 16 (f32) into its
            // tensor, below most devices' binding alignment, as a kv head's keys may in a cache.
            std::vector<float> stored(4, 0.0f);
            stored.insert(stored.end(), input.begin(), input.end());
            const std::vector<unsigned char> input_bytes = test::encode(stored, dtype);
            std::vector<int32_t> positions(tokens + 2);
            for (int32_t& p : positions) p = position(test::rng());
            const std::vector<uint32_t> turns = ops::rope_turn_table(shape.rope);
            std::vector<std::vector<float>> results;
            for (Backend* backend : {&test::cpu_backend(), gpu}) {
              auto in = test::make_tensor(*backend, input_bytes.data(), input_bytes.size());
              auto pos = test::make_tensor(*backend, positions.data(), positions.size() * 4);
              auto table = test::make_tensor(*backend, turns.data(), std::max<size_t>(turns.size(), 1) * 4);
              const size_t out_bytes = input.size() * dtype_size(out_dtype);
              auto out = test::make_poisoned(*backend, out_bytes);
              backend->begin();
              // Token 0 reads positions[2]: offset views must be honoured.
              ops::rope(*backend, shape, {View{in.get(), 4 * dtype_size(dtype)}, View{pos.get(), 8}, view(*table), view(*out)});
              backend->submit();
              results.push_back(test::decode(test::read_tensor(*backend, *out, out_bytes), out_dtype));
            }
            INFO(std::string(dtype_name(dtype)), " in, ", std::string(dtype_name(out_dtype)), " out, style ", style, " head_dim ", head_dim, " rotary ",
                 rotary_dims);
            // Angles are exact to 2^-32 turns on the GPU and in double on the CPU; what remains
            // is f32 rounding of the polynomial and the rotation: a few 1e-7 of the scale. An f16
            // output may round a value to either side of a rounding boundary: one f16 ulp, at
            // most 2^-10 of the scale.
            CHECK(test::relative_max_error(results[1], results[0]) < (out_dtype == Dtype::F16 ? 1e-3 : 1e-6));
          }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("rope on Vulkan covers more rows than one dispatch of 65535 workgroups reaches") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const uint32_t tokens = 2053, heads = 32, head_dim = 128;  // 8.4M items: past 65535 groups of 128
  ops::RopeShape shape{tokens, heads, head_dim, Dtype::F16, {KVC_ROPE_NONE, 0, 10000.0}, 0.5f};
  std::vector<float> input = test::random_floats(size_t(tokens) * heads * head_dim);
  const std::vector<unsigned char> input_bytes = test::encode(input, Dtype::F16);
  auto in = test::make_tensor(*gpu, input_bytes.data(), input_bytes.size());
  auto out = test::make_poisoned(*gpu, input.size() * 4);
  gpu->begin();
  ops::rope(*gpu, shape, {view(*in), View{}, View{}, view(*out)});
  gpu->submit();
  const std::vector<float> result = test::decode(test::read_tensor(*gpu, *out, input.size() * 4), Dtype::F32);
  size_t wrong = 0;
  for (size_t i = 0; i < input.size(); ++i) wrong += result[i] != input[i] * 0.5f;  // exact: a power-of-two scale
  CHECK(wrong == 0);
}

}  // namespace kvc
