// Vulkan window scores against the CPU reference on fresh random inputs: GQA ratios 1, 3
// and 8, head_dim 64 to 128, windows of 1 to 32, prefixes of 7 to 5000, RoPE or not, f32/f16;
// group x window of 4 to 256 rows (one or two row tiles of the logits kernel), prefixes that
// end inside a slot tile; hits for K from 1 to the whole prefix, with and without ties.
#include <doctest/doctest.h>

#include <algorithm>

#include "support/window_case.h"

namespace kvc {

TEST_CASE("window_scores on Vulkan equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  struct Grid { uint32_t q_heads, kv_heads, head_dim, window, prefix, hit_k; Dtype dtype; kvc_rope_style rope; };
  const Grid grid[] = {{4, 4, 64, 1, 7, 7, Dtype::F32, KVC_ROPE_NONE},          {6, 2, 96, 5, 300, 1, Dtype::F16, KVC_ROPE_NEOX},
                       {8, 1, 128, 32, 1001, 0, Dtype::F32, KVC_ROPE_INTERLEAVED}, {8, 2, 64, 8, 5000, 600, Dtype::F16, KVC_ROPE_NEOX},
                       {4, 2, 128, 3, 2500, 77, Dtype::F32, KVC_ROPE_NONE}};
  for (const Grid& g : grid) {
    ops::WindowScoresShape shape;
    shape.num_q_heads = g.q_heads;
    shape.num_kv_heads = g.kv_heads;
    shape.head_dim = g.head_dim;
    shape.window = g.window;
    shape.num_slots = g.prefix + g.window;
    shape.slot_stride = shape.num_slots + 5;
    shape.dtype = g.dtype;
    shape.rope = {g.rope, g.rope == KVC_ROPE_NONE ? 0u : g.head_dim, 10000.0};
    shape.hit_k = g.hit_k;
    // Queries in [-3, 3] give logits of several units. Hits must match exactly, so inputs are
    // drawn until no row's rank-K boundary lies within 1e-5 of a tie (ten times the f32
    // rounding of a logit, ~1e-6): with thousands of slots a row's K-th and (K+1)-th logits
    // fall that close now and then (about 1 row in 100 at K = 600 of 5000), and f32 and
    // double may then keep different slots. The last
    // query head's queries are zero: its rows tie exactly on both backends (the earliest slots win).
    test::WindowCase problem;
    for (int draw = 0;; ++draw) {
      REQUIRE(draw < 20);
      problem = test::WindowCase::random(shape, 3.0f);
      for (uint32_t j = 0; j < shape.window; ++j)
        std::fill_n(problem.q.begin() + (size_t(j) * shape.num_q_heads + shape.num_q_heads - 1) * shape.head_dim, shape.head_dim, 0.0f);
      if (problem.smallest_rank_gap() > 1e-5) break;
    }
    const test::WindowResult expected = problem.run(test::cpu_backend()), actual = problem.run(*gpu);
    INFO("q_heads ", g.q_heads, " kv_heads ", g.kv_heads, " head_dim ", g.head_dim, " window ", g.window, " prefix ", g.prefix,
         " hit_k ", g.hit_k);
    // f32 logits (dot products of up to 128 terms) and f32 exp on the GPU against double on
    // the CPU: about 1e-6 of the largest probability, as the attention scores test allows.
    CHECK(test::relative_max_error(actual.cumulative, expected.cumulative) < 1e-5);
    CHECK(actual.hits == expected.hits);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
