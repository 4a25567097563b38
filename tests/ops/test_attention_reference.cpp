// The CPU attention against the formula (softmax(q k^T / sqrt(d)) v, causal, RoPE by the
// complex-rotation definition) evaluated directly in long double.
#include <doctest/doctest.h>

#include "support/attention_case.h"
#include "support/formulas.h"
#include "support/test_support.h"
#include "ops/rope.h"

namespace kvc {

TEST_CASE("attention_cpu equals the direct softmax formula") {
  struct Shape {
    uint32_t q_heads, kv_heads, head_dim, queries, slots;
    kvc_rope_style rope;
  };
  const Shape shapes[] = {{1, 1, 8, 1, 1, KVC_ROPE_NONE},    {4, 1, 16, 1, 37, KVC_ROPE_NEOX},
                          {8, 2, 24, 5, 5, KVC_ROPE_INTERLEAVED}, {6, 3, 64, 7, 130, KVC_ROPE_NEOX},
                          {8, 1, 96, 3, 61, KVC_ROPE_NONE}};
  for (const Shape& s : shapes) {
    for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
      ops::AttentionShape shape;
      shape.num_q_heads = s.q_heads;
      shape.num_kv_heads = s.kv_heads;
      shape.head_dim = s.head_dim;
      shape.num_queries = s.queries;
      shape.num_slots = s.slots;
      shape.dtype = dtype;
      shape.rope = {s.rope, s.rope == KVC_ROPE_NONE ? 0u : s.head_dim, 10000.0};
      const test::AttentionCase problem = test::AttentionCase::random(shape, 3.0f);
      const test::AttentionResult cpu = problem.run(test::cpu_backend(), true);
      const test::DirectAttention direct =
          test::attention_by_formula(problem.q, problem.k, problem.v, problem.positions, s.q_heads, s.kv_heads, s.head_dim,
                                     s.queries, s.slots, shape.rope);
      INFO("q_heads ", s.q_heads, " kv_heads ", s.kv_heads, " head_dim ", s.head_dim, " queries ", s.queries, " slots ",
           s.slots, " ", std::string(dtype_name(dtype)));
      // f32 output: the reference accumulates in double, so only the final rounding to the
      // output dtype separates it from the formula: 2^-24 (f32) or 2^-11 (f16) of the scale.
      const double tolerance = dtype == Dtype::F32 ? 1e-6 : 1e-3;
      CHECK(test::relative_max_error(cpu.out, std::vector<float>(direct.out.begin(), direct.out.end())) < tolerance);
      CHECK(test::relative_max_error(cpu.scores, std::vector<float>(direct.scores.begin(), direct.scores.end())) < 1e-5);
    }
  }
}

TEST_CASE("attention_cpu over keys stored rotated equals attention rotating them as it reads") {
  for (kvc_rope_style style : {KVC_ROPE_NEOX, KVC_ROPE_INTERLEAVED})
    for (uint32_t queries : {1u, 6u}) {
      ops::AttentionShape shape;
      shape.num_q_heads = 6;
      shape.num_kv_heads = 3;
      shape.head_dim = 40;
      shape.num_queries = queries;
      shape.num_slots = 57;
      shape.rope = {style, 24, 10000.0};
      const test::AttentionCase rotating = test::AttentionCase::random(shape, 3.0f);
      test::AttentionCase stored = rotating;
      stored.shape.keys_rotated = true;
      const std::vector<double> inv_freq = ops::rope_inverse_frequencies(shape.rope);
      for (size_t row = 0; row < stored.positions.size(); ++row)
        ops::rope_rotate_row(shape.rope, inv_freq, &stored.k[row * shape.head_dim], stored.positions[row]);
      const test::AttentionResult expected = rotating.run(test::cpu_backend(), true);
      const test::AttentionResult got = stored.run(test::cpu_backend(), true);
      INFO("style ", style, " queries ", queries);
      // The same keys but for the rotation's rounding to f32 (in the op or in this test).
      CHECK(test::relative_max_error(got.out, expected.out) < 1e-6);
      CHECK(test::relative_max_error(got.scores, expected.scores) < 1e-5);
    }
}

TEST_CASE("attention scores sum to the query rows that read the kv head") {
  ops::AttentionShape shape;
  shape.num_q_heads = 8;
  shape.num_kv_heads = 2;
  shape.head_dim = 32;
  shape.num_queries = 4;
  shape.num_slots = 50;
  const test::AttentionCase problem = test::AttentionCase::random(shape);
  const test::AttentionResult cpu = problem.run(test::cpu_backend(), true);
  for (uint32_t kv = 0; kv < 2; ++kv) {
    double total = 0;
    for (uint32_t slot = 0; slot < 50; ++slot) total += cpu.scores[kv * 50 + slot];
    CHECK(total == doctest::Approx(4.0 * 4.0).epsilon(1e-5));  // 4 queries x 4 heads per group
  }
}

TEST_CASE("a query never sees slots after its own (causality)") {
  ops::AttentionShape shape;
  shape.num_q_heads = 2;
  shape.num_kv_heads = 1;
  shape.head_dim = 16;
  shape.num_queries = 6;
  shape.num_slots = 20;
  test::AttentionCase problem = test::AttentionCase::random(shape);
  const test::AttentionResult before = problem.run(test::cpu_backend(), false);
  for (size_t d = 0; d < 16; ++d) {  // change the last slot: only the last query may move
    problem.k[19 * 16 + d] += 0.5f;
    problem.v[19 * 16 + d] += 0.5f;
  }
  const test::AttentionResult after = problem.run(test::cpu_backend(), false);
  const size_t last_query_start = 5 * 2 * 16;
  for (size_t i = 0; i < last_query_start; ++i) CHECK(after.out[i] == before.out[i]);
  bool last_changed = false;
  for (size_t i = last_query_start; i < after.out.size(); ++i) last_changed |= after.out[i] != before.out[i];
  CHECK(last_changed);
}

}  // namespace kvc
