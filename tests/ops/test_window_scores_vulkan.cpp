// Vulkan window scores against the CPU reference on fresh random inputs: GQA ratios 1, 3
// and 8, head_dim 64 to 128, windows of 1 to 32, prefixes of 7 to 5000, RoPE or not, f32/f16;
// group x window of 4 to 256 rows (one or two row tiles of the logits kernel), prefixes that
// end inside a slot tile; with the probabilities and with the sums alone.
#include <doctest/doctest.h>

#include "support/window_case.h"

namespace kvc {

TEST_CASE("window_scores on Vulkan equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  struct Grid { uint32_t q_heads, kv_heads, head_dim, window, prefix; Dtype dtype; kvc_rope_style rope; };
  const Grid grid[] = {{4, 4, 64, 1, 7, Dtype::F32, KVC_ROPE_NONE},     {6, 2, 96, 5, 300, Dtype::F16, KVC_ROPE_NEOX},
                       {8, 1, 128, 32, 1001, Dtype::F32, KVC_ROPE_INTERLEAVED}, {8, 2, 64, 32, 5000, Dtype::F16, KVC_ROPE_NEOX}};
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
    const test::WindowCase problem = test::WindowCase::random(shape, 3.0f);
    const test::WindowResult expected = problem.run(test::cpu_backend()), actual = problem.run(*gpu);
    const test::WindowResult sums_only = problem.run(*gpu, false);
    INFO("q_heads ", g.q_heads, " kv_heads ", g.kv_heads, " head_dim ", g.head_dim, " window ", g.window, " prefix ", g.prefix);
    // f32 logits (dot products of up to 128 terms) and f32 exp on the GPU against double on
    // the CPU: about 1e-6 of the largest probability, as the attention scores test allows.
    CHECK(test::relative_max_error(actual.probs, expected.probs) < 1e-5);
    CHECK(test::relative_max_error(actual.cumulative, expected.cumulative) < 1e-5);
    CHECK(sums_only.cumulative == actual.cumulative);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
