// 1-D max pooling along rows with "same" padding: out[i] = max of in[j] for |j - i| <= r,
// j inside the row (SnapKV's smoothing of the window scores, Li et al. 2024, Sec. 4.2:
// kernel 7, padding 3, so a selected token brings its neighbours' evidence along).
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace kvc::ops {

struct MaxPoolShape {
  uint32_t num_rows = 0;
  uint32_t row_length = 0;
  uint32_t kernel_size = 7;  // odd, >= 1
};

struct MaxPoolArgs {
  View in;   // f32 [num_rows][row_length]
  View out;  // f32 [num_rows][row_length], not overlapping `in`
};

void max_pool(Backend& backend, const MaxPoolShape& shape, const MaxPoolArgs& args);
void max_pool_cpu(const MaxPoolShape& shape, const MaxPoolArgs& args);
void max_pool_vulkan(Backend& backend, const MaxPoolShape& shape, const MaxPoolArgs& args);

}  // namespace kvc::ops
