// Batched decode attention on Vulkan against the CPU reference (each cache's own attention)
// on fresh random inputs: 1, 3, 8 and 33 caches (several dispatch groups on lavapipe, whose
// descriptor limits take 7 caches a dispatch), lengths from 1 to 5000 in one batch, f32 and
// f16, GQA ratios 1 and 4, without RoPE, with NeoX and partial interleaved RoPE (keys stored rotated and rotated as read
// mixed in one batch); both the batched kernels and the per-cache fallback.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ops/attention_batch.h"
#include "support/attention_case.h"
#include "support/test_support.h"

namespace kvc {
namespace {

// As test_attention_vulkan.cpp's decode: f32 within 1e-5 of the output scale (f32 sums over
// up to 5000 slots), f16 within the two roundings of the output to f16 (2^-11 each).
double tolerance(Dtype dtype) { return dtype == Dtype::F32 ? 1e-5 : 2e-3; }

// Cache i's length: odd, non-power-of-two and tiny ones, one long cache of 5000 slots.
uint32_t length_of(uint32_t cache, uint32_t caches) {
  static const uint32_t lengths[] = {37, 1, 130, 513, 255, 1000, 4099};
  if (caches == 1) return 999;
  return cache == 1 ? 5000 : lengths[cache % 7];
}

void check_batch(uint32_t caches, uint32_t q_heads, uint32_t kv_heads, Dtype dtype, const ops::RopeParams& rope, uint32_t head_dim = 128) {
  std::vector<test::AttentionCase> problems;
  for (uint32_t cache = 0; cache < caches; ++cache) {
    ops::AttentionShape shape;
    shape.num_q_heads = q_heads;
    shape.num_kv_heads = kv_heads;
    shape.head_dim = head_dim;
    shape.num_queries = 1;
    shape.num_slots = length_of(cache, caches);
    shape.dtype = dtype;
    shape.rope = rope;
    shape.keys_rotated = rope.enabled() && cache % 2 == 0;  // FULL's caches beside the others'
    problems.push_back(test::AttentionCase::random(shape));
  }
  std::vector<std::vector<float>> expected;
  for (const test::AttentionCase& problem : problems) expected.push_back(problem.run(test::cpu_backend(), false).out);

  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (bool per_cache : {false, true}) {
    const test::EnvironmentSetting fallback("KVC_BATCH_DECODE", per_cache ? "per_cache" : nullptr);
    CHECK((ops::attention_batch_caches_per_dispatch(*gpu) == 0) == per_cache);
    std::vector<test::AttentionTensors> tensors;
    std::vector<ops::DecodeEntry> entries;
    for (const test::AttentionCase& problem : problems) {
      tensors.push_back(problem.upload(*gpu));
      entries.push_back({problem.shape, tensors.back().args()});
    }
    gpu->begin();
    ops::attention_batch(*gpu, entries);
    gpu->submit();
    for (uint32_t cache = 0; cache < caches; ++cache) {
      INFO(caches, " caches, cache ", cache, " of ", problems[cache].shape.num_slots, " slots, q_heads ", q_heads, " kv_heads ", kv_heads, " head_dim ", head_dim,
           " ", std::string(dtype_name(dtype)), " rope ", rope.style, "/", rope.rotary_dims, per_cache ? " per cache" : " batched");
      const std::vector<float> actual = test::decode(test::read_tensor(*gpu, *tensors[cache].out, tensors[cache].out->bytes()), dtype);
      CHECK(test::relative_max_error(actual, expected[cache]) < tolerance(dtype));
    }
  }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("batched decode attention on Vulkan equals the CPU reference per cache") {
  for (uint32_t caches : {1u, 3u, 8u, 33u})
    for (Dtype dtype : {Dtype::F32, Dtype::F16})
      for (const ops::RopeParams& rope : {ops::RopeParams{}, ops::RopeParams{KVC_ROPE_NEOX, 128, 10000.0},
                                          ops::RopeParams{KVC_ROPE_INTERLEAVED, 64, 500000.0}}) {
        check_batch(caches, 4, 4, dtype, rope);
        check_batch(caches, 8, 2, dtype, rope);
      }
}

TEST_CASE("batched decode attention on Vulkan: several query-head blocks per kv head, small and large heads") {
  // MQA with 24 query heads takes head blocks of 6 (four workgroups per kv head and split);
  // head_dim 256 in f32 is 64 lanes per key, more than a subgroup: the shared-memory lane sum.
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_batch(5, 24, 1, dtype, ops::RopeParams{KVC_ROPE_NEOX, 64, 10000.0}, 64);
    check_batch(4, 8, 4, dtype, ops::RopeParams{KVC_ROPE_INTERLEAVED, 128, 10000.0}, 256);
  }
}

}  // namespace
}  // namespace kvc
