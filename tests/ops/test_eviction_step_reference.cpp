// The eviction step's CPU reference against each paper's rule written directly (support/
// eviction_stream: a list of tokens in rank order, Algorithm 1 line by line, in double), the
// invariants every policy keeps, TreeKV's left-token ablation against a closed form, and the
// tree's density toward the end (TreeKV Figure 1).
#include <doctest/doctest.h>

#include <cstring>
#include <utility>

#include "support/eviction_stream.h"
#include "support/test_support.h"

namespace kvc {
namespace {

using ops::EvictionRule;

ops::EvictionShape stream_shape(EvictionRule rule, uint32_t capacity, uint32_t sinks, uint32_t window) {
  return test::eviction_stream_shape(rule, capacity, sinks, window, 3, 8, Dtype::F32);
}

// One token through the reference with random scores, scattered to the slots by their ranks.
std::vector<std::vector<double>> feed_random_token(test::EvictionStream& stream) {
  const uint32_t held = stream.shape.slots_held + 1, heads = stream.shape.num_kv_heads;
  const int32_t* ranks = static_cast<const int32_t*>(stream.positions->host());
  const std::vector<float> by_rank = test::random_floats(size_t(heads) * held, 0.001f, 1.0f);
  std::vector<float> by_slot(by_rank.size());
  std::vector<std::vector<double>> scores(heads, std::vector<double>(held));
  for (uint32_t h = 0; h < heads; ++h)
    for (uint32_t slot = 0; slot < held; ++slot) {
      const uint32_t rank = slot + 1 == held ? slot : uint32_t(ranks[size_t(h) * stream.shape.slot_stride + slot]);
      by_slot[size_t(h) * held + slot] = by_rank[size_t(h) * held + rank];
      scores[h][rank] = by_rank[size_t(h) * held + rank];
    }
  auto tensor = test::make_tensor(stream.backend, by_slot.data(), by_slot.size() * 4);
  stream.record_tokens(view(*tensor));
  return scores;
}

}  // namespace

TEST_CASE("eviction_step reference evicts what each paper's rule evicts") {
  const uint32_t capacity = 37;
  // With no sinks and no window the tree rule is Algorithm 1 as printed (the newest token may go).
  for (const auto& [sinks, window] : {std::pair<uint32_t, uint32_t>{4, 7}, {0, 0}})
  for (EvictionRule rule : {EvictionRule::Oldest, EvictionRule::Accumulated, EvictionRule::CurrentQuery, EvictionRule::Tree,
                            EvictionRule::TreeLeft}) {
    const ops::EvictionShape shape = stream_shape(rule, capacity, sinks, window);
    test::EvictionStream stream(test::cpu_backend(), shape, capacity);
    test::EvictionByFormula formula(shape, capacity);
    INFO("rule ", uint32_t(rule), " sinks ", sinks, " window ", window);
    for (uint32_t token = 0; token < 1500; ++token) {
      formula.add_token(feed_random_token(stream));
      // f32 products and sums decide within ~1e-7 of the double formula: a decision closer than
      // 1e-6 may go either way, so the comparison stops there (rare: about 1 run in 200).
      if (formula.min_margin < 1e-6) {
        MESSAGE("near-tie after token ", token, ": later decisions are not compared");
        break;
      }
      if (token % 50 != 49) continue;
      const auto kept = stream.kept_tokens();
      REQUIRE(kept == formula.kept);
      for (uint32_t h = 0; h < shape.num_kv_heads; ++h) {
        REQUIRE(kept[h].size() == std::min(token + 1, capacity));
        for (uint32_t s = 0; s < sinks; ++s) CHECK(kept[h][s] == s);
        for (uint32_t r = 0; r < shape.recent_window; ++r) CHECK(kept[h][capacity - 1 - r] == token - r);
      }
    }
  }
}

TEST_CASE("TreeKV left-token ablation keeps the closed-form tree") {
  // Each full cycle of idx over a region of m tokens evicts positions 1, 2, ..., m of a list
  // that grows by one token per step: that removes every odd element of (previous list ++ the
  // cycle's m new tokens). For m = 2^p, after n >= p + 1 cycles the region's tokens, as ages
  // before its newest, are m/2^l tokens spaced 2^l from age (l - 1) m for l = 1..p, plus age p m.
  for (uint32_t p : {3u, 4u, 6u}) {
    const uint32_t m = 1u << p, sinks = 3, window = 5, capacity = sinks + m + window;
    for (uint32_t cycles : {p + 1, p + 3}) {
      const uint32_t tokens = sinks + window + cycles * m;
      test::EvictionStream stream(test::cpu_backend(), stream_shape(EvictionRule::TreeLeft, capacity, sinks, window), capacity);
      for (uint32_t token = 0; token < tokens; ++token) feed_random_token(stream);
      std::vector<uint32_t> expected;
      for (uint32_t s = 0; s < sinks; ++s) expected.push_back(s);
      const uint32_t newest_in_region = tokens - window - 1;
      std::vector<uint32_t> ages{p * m};
      for (uint32_t l = p; l >= 1; --l)
        for (uint32_t j = m >> l; j-- > 0;) ages.push_back((l - 1) * m + j * (1u << l));
      for (uint32_t age : ages) expected.push_back(newest_in_region - age);
      for (uint32_t r = window; r-- > 0;) expected.push_back(tokens - 1 - r);
      INFO("m ", m, " cycles ", cycles);
      for (const auto& kept : stream.kept_tokens()) CHECK(kept == expected);
    }
  }
}

TEST_CASE("TreeKV keeps tokens denser toward the end on random scores (Figure 1)") {
  const uint32_t sinks = 4, window = 16, capacity = sinks + 64 + window, tokens = 4000;
  test::EvictionStream stream(test::cpu_backend(), stream_shape(EvictionRule::Tree, capacity, sinks, window), capacity);
  for (uint32_t token = 0; token < tokens; ++token) feed_random_token(stream);
  // The evictable history [sinks, tokens - window) in 8 equal spans, oldest first: each span
  // keeps at least the share of its older neighbour, and the newest several times the oldest.
  const uint32_t first = sinks, end = tokens - window, spans = 8, span = (end - first) / spans;
  for (const auto& kept : stream.kept_tokens()) {
    std::vector<uint32_t> per_span(spans);
    for (uint32_t token : kept)
      if (token >= first && token < first + spans * span) ++per_span[(token - first) / span];
    INFO("kept per span, oldest first: ", per_span[0], " ", per_span[1], " ", per_span[2], " ", per_span[3], " ", per_span[4],
         " ", per_span[5], " ", per_span[6], " ", per_span[7]);
    for (uint32_t s = 1; s < spans; ++s) CHECK(per_span[s] + 1 >= per_span[s - 1]);
    CHECK(per_span[spans - 1] >= 4 * std::max(1u, per_span[0]));
  }
}

}  // namespace kvc

namespace kvc {

TEST_CASE("eviction_step reference counts, for a chunk, the chunk's queries that see each token") {
  // TreeKV's C counts the queries a token was attended by (Algorithm 1, line 7): in a chunk of
  // n appended tokens, query i sees the ranks up to its own.
  const uint32_t capacity = 30;
  test::EvictionStream stream(test::cpu_backend(), test::eviction_stream_shape(ops::EvictionRule::Tree, capacity, 2, 3, 3, 8, Dtype::F32),
                              capacity);
  std::vector<uint32_t> expected;
  for (uint32_t chunk : {5u, 3u, 1u}) {
    for (uint32_t& count : expected) count += chunk;
    for (uint32_t i = chunk; i >= 1; --i) expected.push_back(i);
    const std::vector<float> scores(size_t(3) * expected.size(), 0.5f);
    auto tensor = test::make_tensor(stream.backend, scores.data(), scores.size() * 4);
    stream.record_tokens(view(*tensor), chunk);
    for (uint32_t h = 0; h < 3; ++h)
      for (uint32_t slot = 0; slot < expected.size(); ++slot) {
        const size_t at = size_t(h) * stream.shape.slot_stride + slot;
        const int32_t rank = static_cast<const int32_t*>(stream.positions->host())[at];
        CHECK(static_cast<const uint32_t*>(stream.counts->host())[at] == expected[rank]);
      }
  }
}

}  // namespace kvc
