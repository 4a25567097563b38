// The TreeKV prefill reference against §4.2 written directly: block importance as the mean of
// its tokens' S / C from the observation window, Algorithm 1 over the blocks (a list with
// erase, 1-based idx, in double), sinks and recent window kept, survivors in rank order.
#include <doctest/doctest.h>

#include <cmath>

#include "support/test_support.h"
#include "support/tree_prefill_case.h"

namespace kvc {

TEST_CASE("tree_prefill reference keeps the blocks Algorithm 1 keeps") {
  for (int trial = 0; trial < 40; ++trial) {
    const test::TreePrefillCase c = test::TreePrefillCase::random(Dtype::F32);
    const ops::TreePrefillShape& s = c.shape;
    const test::TreePrefillResult result = c.run(test::cpu_backend());
    const uint32_t held = s.slots_held, middle = held - s.sinks - s.recent_window, blocks = middle / s.block;
    const uint32_t first = s.sinks + middle % s.block, budget = (s.capacity - s.sinks - s.recent_window) / s.block;
    const auto window_count = [&](uint32_t rank) { return double(held - std::max(rank, held - s.num_queries)); };
    INFO("trial ", trial, " held ", held, " c ", s.capacity, " sinks ", s.sinks, " window ", s.recent_window, " b ", s.block);
    for (uint32_t h = 0; h < s.num_kv_heads; ++h) {
      std::vector<uint32_t> slot_of(held);
      for (uint32_t slot = 0; slot < held; ++slot) slot_of[c.positions[size_t(h) * s.slot_stride + slot]] = slot;
      const auto score = [&](uint32_t rank) { return double(c.scores[size_t(h) * held + slot_of[rank]]); };
      std::vector<double> importance(blocks);
      for (uint32_t j = 0; j < blocks; ++j) {
        for (uint32_t i = 0; i < s.block; ++i) importance[j] += score(first + j * s.block + i) / window_count(first + j * s.block + i);
        importance[j] /= s.block;
      }
      std::vector<uint32_t> tree;
      uint32_t idx = 1;
      double margin = 1.0;
      for (uint32_t j = 0; j < blocks; ++j) {
        tree.push_back(j);
        if (tree.size() <= budget) continue;
        if (budget == 0) {
          tree.clear();
          continue;
        }
        const double left = importance[tree[idx - 1]], right = importance[tree[idx]];
        margin = std::min(margin, std::fabs(left - right) / std::max(left, right));
        tree.erase(tree.begin() + (left > right ? idx : idx - 1));
        idx = idx % budget + 1;
      }
      if (margin < 1e-5) {  // f32 block sums decide within ~1e-6 of these; closer calls may go either way
        MESSAGE("near-tie: trial not compared");
        continue;
      }
      std::vector<uint32_t> expected;
      for (uint32_t r = 0; r < s.sinks; ++r) expected.push_back(r);
      for (uint32_t j : tree)
        for (uint32_t i = 0; i < s.block; ++i) expected.push_back(first + j * s.block + i);
      for (uint32_t r = held - s.recent_window; r < held; ++r) expected.push_back(r);
      REQUIRE(expected.size() == ops::tree_block_layout(s).kept);
      REQUIRE(expected.size() <= s.capacity);
      const size_t kept = expected.size(), offset = size_t(h) * kept;
      for (size_t new_rank = 0; new_rank < kept; ++new_rank) {
        const uint32_t rank = expected[new_rank];
        CHECK(result.positions[offset + new_rank] == int32_t(new_rank));
        CHECK(load_element(result.k.data(), Dtype::F32, (offset + new_rank) * s.head_dim) == float(rank));
        const size_t source = (size_t(h) * s.slot_stride + slot_of[rank]) * s.head_dim;
        CHECK(load_element(result.v.data(), Dtype::F32, (offset + new_rank) * s.head_dim + 1) == c.v[source + 1]);
        CHECK(result.sums[offset + new_rank] == float(score(rank)));
        CHECK(result.counts[offset + new_rank] == uint32_t(window_count(rank)));
      }
    }
  }
}

}  // namespace kvc
