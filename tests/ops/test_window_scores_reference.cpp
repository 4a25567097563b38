// The CPU window scores against the attention formula (support/formulas): the sums per kv
// head are attention's scores for a chunk that is exactly the window, and the hits count the
// rows whose top K (by the formula's distribution of that single query over the slots it
// sees, the earlier slot first on ties) holds the slot.
#include <doctest/doctest.h>

#include <algorithm>

#include "support/formulas.h"
#include "support/window_case.h"

namespace kvc {

TEST_CASE("window_scores_cpu equals the softmax formula per window query and summed") {
  for (kvc_rope_style rope : {KVC_ROPE_NONE, KVC_ROPE_NEOX, KVC_ROPE_INTERLEAVED}) {
    ops::WindowScoresShape shape;
    shape.num_q_heads = 6;
    shape.num_kv_heads = 2;
    shape.head_dim = 16;
    shape.window = 4;
    shape.num_slots = 23;
    shape.slot_stride = 23;  // the formula reads k as [kv][num_slots][d]
    shape.rope = {rope, rope == KVC_ROPE_NONE ? 0u : 16u, 10000.0};
    shape.hit_k = 5;
    test::WindowCase problem = test::WindowCase::random(shape);
    // Head 1's queries are zero: its rows are uniform, all slots tie and the earliest win.
    for (uint32_t j = 0; j < shape.window; ++j)
      std::fill_n(problem.q.begin() + (size_t(j) * shape.num_q_heads + 1) * shape.head_dim, shape.head_dim, 0.0f);
    const test::WindowResult got = problem.run(test::cpu_backend());
    const uint32_t prefix = shape.num_prefix(), group = shape.num_q_heads / shape.num_kv_heads;
    const std::vector<float> no_values(problem.k.size(), 0.0f);
    const test::DirectAttention whole = test::attention_by_formula(problem.q, problem.k, no_values, problem.positions, shape.num_q_heads,
                                                                   shape.num_kv_heads, shape.head_dim, shape.window, shape.num_slots, shape.rope);
    std::vector<float> expected_sums;
    std::vector<uint32_t> expected_hits(size_t(shape.num_kv_heads) * prefix, 0);
    for (uint32_t kv = 0; kv < shape.num_kv_heads; ++kv)
      for (uint32_t slot = 0; slot < prefix; ++slot) expected_sums.push_back(float(whole.scores[kv * shape.num_slots + slot]));
    for (uint32_t head = 0; head < shape.num_q_heads; ++head)
      for (uint32_t j = 0; j < shape.window; ++j) {
        const uint32_t kv = head / group, seen = prefix + j + 1;
        const std::vector<float> query(problem.q.begin() + (size_t(j) * shape.num_q_heads + head) * shape.head_dim,
                                       problem.q.begin() + (size_t(j) * shape.num_q_heads + head + 1) * shape.head_dim);
        const std::vector<float> keys(problem.k.begin() + size_t(kv) * shape.slot_stride * shape.head_dim,
                                      problem.k.begin() + (size_t(kv) * shape.slot_stride + seen) * shape.head_dim);
        const std::vector<int32_t> positions(problem.positions.begin() + size_t(kv) * shape.slot_stride,
                                             problem.positions.begin() + size_t(kv) * shape.slot_stride + seen);
        const test::DirectAttention single = test::attention_by_formula(query, keys, std::vector<float>(keys.size()), positions, 1, 1,
                                                                        shape.head_dim, 1, seen, shape.rope);
        std::vector<uint32_t> order(prefix);
        for (uint32_t slot = 0; slot < prefix; ++slot) order[slot] = slot;
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return single.scores[a] > single.scores[b]; });
        for (uint32_t i = 0; i < shape.hit_k; ++i) ++expected_hits[size_t(kv) * prefix + order[i]];
      }
    INFO("rope ", rope);
    // Both round the rotated rows to f32 (2^-24 relative) before logits of order 1: the
    // probabilities then agree to a few 1e-7 of their scale.
    CHECK(test::relative_max_error(got.cumulative, expected_sums) < 1e-6);
    CHECK(got.hits == expected_hits);
  }
}

}  // namespace kvc
