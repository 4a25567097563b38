#include "policies/pyramid_budgets.h"

#include <algorithm>
#include <cmath>

namespace kvc {

std::vector<uint32_t> pyramid_budgets(uint32_t budget, uint32_t window, uint32_t num_layers, double beta, uint32_t prefix_length) {
  const double average = double(budget - window);
  double smallest = std::floor(average / beta);
  double largest = 2.0 * average - smallest;
  if (largest > prefix_length) {
    largest = prefix_length;
    smallest = 2.0 * average - largest;
  }
  std::vector<uint32_t> budgets(num_layers);
  uint64_t assigned = 0;
  for (uint32_t layer = 0; layer < num_layers; ++layer) {
    const double share = num_layers == 1 ? average : largest - (largest - smallest) * layer / (num_layers - 1);
    budgets[layer] = static_cast<uint32_t>(std::floor(share));
    assigned += budgets[layer];
  }
  const uint64_t total = uint64_t(budget - window) * num_layers;
  for (uint32_t layer = 0; assigned < total && layer < num_layers; ++layer) {
    if (budgets[layer] < prefix_length) {
      ++budgets[layer];
      ++assigned;
    }
  }
  for (uint32_t& layer_budget : budgets) layer_budget += window;
  return budgets;
}

}  // namespace kvc
