// PyramidKV's schedule (Cai et al. 2025, Sec. 4.2) and HitKV's hit threshold, checked against
// their definitions: budgets fall linearly from 2a - a/beta to a/beta (a = budget - window)
// and sum to the total; hits needed is the least count c with c / rows >= theta.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "policies/pyramid_budgets.h"
#include "policies/window_selection.h"

namespace kvc {

TEST_CASE("pyramid budgets fall linearly from the first layer to the last and sum to the total") {
  struct Case { uint32_t budget, window, layers; double beta; uint32_t prefix; };
  for (const Case& c : {Case{1024, 32, 32, 20.0, 32768}, Case{128, 8, 7, 20.0, 5000}, Case{64, 16, 1, 20.0, 300},
                        Case{100, 10, 5, 2.0, 120}}) {
    const std::vector<uint32_t> budgets = pyramid_budgets(c.budget, c.window, c.layers, c.beta, c.prefix);
    INFO("budget ", c.budget, " window ", c.window, " layers ", c.layers, " beta ", c.beta, " prefix ", c.prefix);
    REQUIRE(budgets.size() == c.layers);
    CHECK(std::accumulate(budgets.begin(), budgets.end(), uint64_t(0)) == uint64_t(c.budget) * c.layers);
    const double average = c.budget - c.window;
    double last = std::floor(average / c.beta), first = 2 * average - last;
    if (first > c.prefix) first = c.prefix, last = 2 * average - first;
    for (uint32_t layer = 0; layer < c.layers; ++layer) {
      const double linear = c.layers == 1 ? average : first - (first - last) * layer / (c.layers - 1);
      CHECK(budgets[layer] >= c.window + std::floor(linear));
      CHECK(budgets[layer] <= c.window + std::floor(linear) + 1);
      if (layer > 0) CHECK(budgets[layer] <= budgets[layer - 1]);
    }
  }
}

TEST_CASE("hits needed is the least count whose rate reaches theta") {
  for (float theta : {0.0f, 0.1f, 0.3f, 0.5f, 0.75f, 1.0f})
    for (uint32_t rows : {1u, 10u, 32u, 128u, 1000u}) {
      const uint32_t needed = hits_needed(theta, rows);
      INFO("theta ", theta, " rows ", rows);
      CHECK(double(needed) / rows >= double(theta));
      if (needed > 0) CHECK(double(needed - 1) / rows < double(theta));
    }
  CHECK(hits_needed(0.5f, 128) == 64);
}

}  // namespace kvc
