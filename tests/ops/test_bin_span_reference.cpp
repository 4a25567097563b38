// mirrored_bin_span against a search over every cyclic run: it holds each bin and its mirror,
// and no shorter run does.
#include <doctest/doctest.h>

#include "ops/bin_span.h"
#include "support/test_support.h"

namespace kvc {

namespace {

bool run_holds(uint32_t first, uint32_t count, uint32_t length, uint32_t bin) {
  return (bin + length - first) % length < count;
}

bool run_holds_all(uint32_t first, uint32_t count, uint32_t length, const std::vector<uint32_t>& bins) {
  for (const uint32_t k : bins)
    if (!run_holds(first, count, length, k) || !run_holds(first, count, length, (length - k) % length)) return false;
  return true;
}

}  // namespace

TEST_CASE("mirrored_bin_span: the shortest cyclic run holding every bin and its mirror") {
  // Hand cases: low bins wrap around 0; a bin at M/2 is its own mirror; every bin is all.
  CHECK(ops::mirrored_bin_span({0, 1, 2}, 10).first == 8);
  CHECK(ops::mirrored_bin_span({0, 1, 2}, 10).count == 5);  // 8, 9, 0, 1, 2
  CHECK(ops::mirrored_bin_span({0}, 7).count == 1);
  CHECK(ops::mirrored_bin_span({5}, 10).first == 5);
  CHECK(ops::mirrored_bin_span({5}, 10).count == 1);
  CHECK(ops::mirrored_bin_span({4, 5}, 10).first == 4);
  CHECK(ops::mirrored_bin_span({4, 5}, 10).count == 3);  // 4, 5, 6
  CHECK(ops::mirrored_bin_span({0, 1, 2, 3}, 7).first == 0);
  CHECK(ops::mirrored_bin_span({0, 1, 2, 3}, 7).count == 7);
  // Random sets over odd, even and tiny lengths against every run.
  for (int trial = 0; trial < 300; ++trial) {
    const uint32_t length = 1 + uint32_t(test::rng()() % 40);
    std::vector<uint32_t> bins(1 + test::rng()() % 4);
    for (uint32_t& k : bins) k = uint32_t(test::rng()() % length);
    const ops::BinSpan span = ops::mirrored_bin_span(bins, length);
    INFO("M ", length, " bins ", bins.size(), " first ", span.first, " count ", span.count);
    REQUIRE(span.count >= 1);
    REQUIRE(span.count <= length);
    CHECK(span.first < length);
    CHECK(run_holds_all(span.first, span.count, length, bins));
    for (uint32_t first = 0; first < length; ++first) CHECK_FALSE(run_holds_all(first, span.count - 1, length, bins));
  }
}

}  // namespace kvc
