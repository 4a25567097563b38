// Vulkan FourierAttention fold: shaders/hippo_fourier_project.comp with FOLD, K and V one part
// each of the grid.
#include "ops/fourier_fold.h"
#include "ops/hippo_project_vulkan.h"

namespace kvc::ops {

void fourier_fold_vulkan(Backend& backend, const FourierFoldShape& shape, const FourierFoldArgs& args) {
  const HippoFourierShape projection{shape.num_heads, shape.head_dim, shape.num_states, shape.window_length, 0, shape.dtype};
  const HippoFourierSegment segment{shape.slot_stride, shape.first_slot, shape.length, shape.first_index};
  const HippoProjectPart parts[2] = {{shape.key_compressed, args.k, args.k_dims, args.k_coefficients, args.k_packed},
                                     {shape.value_compressed, args.v, args.v_dims, args.v_coefficients, args.v_packed}};
  record_hippo_project(backend, projection, segment, parts, 2, true, shape.middle_stride);
}

}  // namespace kvc::ops
