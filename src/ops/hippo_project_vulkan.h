// shaders/hippo_fourier_project.comp's dispatch, shared by ops::hippo_fourier_project (one part,
// Direct route) and ops::fourier_fold (K and V, with their packing); Vulkan implementations only.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"
#include "ops/hippo_fourier.h"

namespace kvc::ops {

// One part of a projection: its rows, dims, coefficients and (fold only) packed middle.
struct HippoProjectPart {
  uint32_t num_dims = 0;  // dims projected (the compressed ones, first in dims)
  View rows, dims, coefficients, packed;
};

// Records the projection of `segment` for `parts_count` (1 or 2) parts of one shape but for
// num_dims; with `fold`, each part's other dims are packed into its packed middle (tokens
// segment.first_index .. of each kept dim's run, runs of packed_stride tokens: dim-major).
void record_hippo_project(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                          const HippoProjectPart* parts, uint32_t parts_count, bool fold, uint32_t packed_stride);

}  // namespace kvc::ops
