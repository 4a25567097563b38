// PyramidKV's per-layer budgets (Cai et al. 2025, Sec. 4.2 and its released code): the prefix
// part of the budget falls linearly from the first layer to the last, from
// 2 * (B - w) - (B - w) / beta down to (B - w) / beta, so lower layers, whose attention is
// spread wide, keep more than the upper ones, where it has funnelled onto a few tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc {

// Tokens each of `num_layers` layers keeps, window included, averaging `budget` per layer.
// As in PyramidKV's code, when the first layer's share would pass the prefix length it is
// capped there and the last layer's raised to keep the average. The code's integer steps
// lose a few tokens to rounding; here the linear schedule is rounded down and the remainder
// handed one token at a time to the first layers, so the budgets sum to num_layers * budget
// exactly (when the prefix can hold it).
std::vector<uint32_t> pyramid_budgets(uint32_t budget, uint32_t window, uint32_t num_layers, double beta, uint32_t prefix_length);

}  // namespace kvc
