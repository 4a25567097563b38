// Vulkan attention against the CPU reference on fresh random inputs over a grid of shapes:
// decode (flash-decoding split + merge) and causal chunks, with and without RoPE, f32 and
// f16, GQA ratios 1, 4 and 8, head_dim 8 to 256, cache lengths from 1 to 70000.
#include <doctest/doctest.h>

#include "support/attention_case.h"
#include "support/test_support.h"

namespace kvc {
namespace {

// f32: both accumulate in f32 or better; 1e-5 of the output scale covers the GPU's f32
// summation over up to 70000 slots. f16: both round the output to f16 (2^-11 relative each).
double tolerance(Dtype dtype) { return dtype == Dtype::F32 ? 1e-5 : 2e-3; }

void check_against_cpu(const ops::AttentionShape& shape, float q_range = 2.0f) {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const bool with_scores = shape.num_slots <= 5000;  // the CPU scores pass is slow past that
  const test::AttentionCase problem = test::AttentionCase::random(shape, q_range);
  const test::AttentionResult expected = problem.run(test::cpu_backend(), with_scores);
  const test::AttentionResult actual = problem.run(*gpu, with_scores);
  INFO("q_heads ", shape.num_q_heads, " kv_heads ", shape.num_kv_heads, " head_dim ", shape.head_dim, " queries ",
       shape.num_queries, " slots ", shape.num_slots, " ", dtype_name(shape.dtype), " rope ", shape.rope.style, "/",
       shape.rope.rotary_dims);
  CHECK(test::relative_max_error(actual.out, expected.out) < tolerance(shape.dtype));
  // Scores are f32 probabilities either way; the sum over queries and heads is of order 1.
  if (with_scores) CHECK(test::relative_max_error(actual.scores, expected.scores) < 1e-5);
  CHECK(test::validation_messages() == 0);
}

ops::AttentionShape make_shape(uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim, uint32_t queries, uint32_t slots,
                               Dtype dtype, kvc_rope_style rope = KVC_ROPE_NONE, uint32_t rotary_dims = 0) {
  ops::AttentionShape shape;
  shape.num_q_heads = q_heads;
  shape.num_kv_heads = kv_heads;
  shape.head_dim = head_dim;
  shape.num_queries = queries;
  shape.num_slots = slots;
  shape.dtype = dtype;
  shape.rope = {rope, rope == KVC_ROPE_NONE ? 0u : (rotary_dims ? rotary_dims : head_dim), 10000.0};
  return shape;
}

}  // namespace

TEST_CASE("decode attention on Vulkan equals the CPU reference") {
  const uint32_t gqa[][2] = {{4, 4}, {8, 2}, {16, 2}};  // ratios 1, 4, 8
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t head_dim : {64u, 96u, 128u})
      for (const auto& heads : gqa)
        for (uint32_t slots : {1u, 2u, 127u, 129u, 1000u, 4099u}) {
          const kvc_rope_style rope = slots % 2 ? KVC_ROPE_NEOX : KVC_ROPE_INTERLEAVED;
          check_against_cpu(make_shape(heads[0], heads[1], head_dim, 1, slots, dtype, rope));
          if (slots == 129u) check_against_cpu(make_shape(heads[0], heads[1], head_dim, 1, slots, dtype));
        }
}

TEST_CASE("decode attention on Vulkan over 70000 slots, peaked and flat softmax") {
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_against_cpu(make_shape(8, 1, 128, 1, 70000, dtype), 2.0f);
    check_against_cpu(make_shape(8, 1, 128, 1, 70000, dtype, KVC_ROPE_NEOX, 64), 8.0f);
  }
}

TEST_CASE("decode attention on Vulkan with more query heads per kv head than one workgroup takes") {
  check_against_cpu(make_shape(24, 1, 64, 1, 333, Dtype::F32, KVC_ROPE_NEOX));  // MQA, group of 24
}

TEST_CASE("decode attention on Vulkan at the head_dim and group limits") {
  // Groups of 3, 6 and 12 take head blocks of 3, 6 and 6 (the largest divisor up to 8);
  // head_dim 8 is one 16-byte lane per key in f16; head_dim 256 in f32 is 64 lanes per key,
  // more than a 32-wide subgroup: the shared-memory lane sum; 40 leaves lanes idle (10 in f16).
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_against_cpu(make_shape(9, 3, 64, 1, 517, dtype, KVC_ROPE_NEOX));
    check_against_cpu(make_shape(12, 2, 128, 1, 300, dtype, KVC_ROPE_INTERLEAVED));
    check_against_cpu(make_shape(12, 1, 64, 1, 77, dtype));
    check_against_cpu(make_shape(4, 2, 8, 1, 1001, dtype, KVC_ROPE_NEOX));
    check_against_cpu(make_shape(4, 1, 256, 1, 2049, dtype, KVC_ROPE_NEOX, 128));
    check_against_cpu(make_shape(8, 2, 40, 1, 130, dtype, KVC_ROPE_INTERLEAVED));
  }
}

TEST_CASE("causal chunk attention on Vulkan equals the CPU reference") {
  // A workgroup takes 64 rows (head_dim 128) to 128 rows (head_dim 64) of one kv head, rows
  // being query x group head: 63, 64 and 129 rows at ratio 1 fall just inside and outside
  // such blocks, and 5 queries leave most of a block empty.
  const uint32_t gqa[][2] = {{4, 4}, {8, 2}, {8, 1}};  // ratios 1, 4, 8
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t head_dim : {64u, 96u, 128u})
      for (const auto& heads : gqa)
        for (uint32_t queries : {2u, 5u, 63u, 129u})
          for (uint32_t cached : {0u, 3u, 1000u}) {
            const kvc_rope_style rope = (queries + cached) % 2 ? KVC_ROPE_NEOX : KVC_ROPE_NONE;
            check_against_cpu(make_shape(heads[0], heads[1], head_dim, queries, cached + queries, dtype, rope));
          }
}

TEST_CASE("causal chunk attention on Vulkan: head dims 8 to 256, interleaved and partial RoPE") {
  // 8: each thread stages its own rows' queries; 40 and 72: an odd number of 8-dim columns
  // (values staged 4 keys at a time); 256: 32-row blocks over 128-key tiles.
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t head_dim : {8u, 40u, 72u, 256u}) {
      check_against_cpu(make_shape(8, 2, head_dim, 37, 37 + 300, dtype, KVC_ROPE_INTERLEAVED));
      check_against_cpu(make_shape(4, 1, head_dim, 70, 70 + 129, dtype, KVC_ROPE_NEOX, head_dim / 2 / 8 * 8 + 8));
    }
  check_against_cpu(make_shape(8, 2, 128, 65, 65 + 500, Dtype::F32, KVC_ROPE_INTERLEAVED, 64));
  check_against_cpu(make_shape(8, 2, 128, 65, 65 + 500, Dtype::F16, KVC_ROPE_NEOX, 32));
}

TEST_CASE("causal chunk attention on Vulkan over a long cache, peaked and flat softmax") {
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_against_cpu(make_shape(8, 2, 128, 100, 100 + 9000, dtype), 2.0f);
    check_against_cpu(make_shape(8, 2, 128, 100, 100 + 9000, dtype, KVC_ROPE_NEOX, 64), 8.0f);
  }
}

}  // namespace kvc
