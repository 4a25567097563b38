// FourierAttention's fold (sec. 3.3, eq. 6; appendix C): window tokens joining the middle, K
// and V at once. For each part, the tokens' compressed dims are projected into its
// coefficients (ops::hippo_fourier_project, Direct: (1/T) F X added at F's columns
// first_index ..) and their other dims packed at the middle's tokens first_index .. (as
// ops::gather_dims writes them, dim-major). One dispatch on Vulkan (shaders/hippo_fourier_project.comp,
// FOLD), where the two projections and two packings of a decode step were four.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

struct FourierFoldShape {
  uint32_t num_heads = 0;
  uint32_t head_dim = 0;
  uint32_t num_states = 0;        // N
  uint32_t window_length = 0;     // T <= 2^24
  uint32_t key_compressed = 0;    // dims per head each part projects (< head_dim)
  uint32_t value_compressed = 0;
  uint32_t slot_stride = 0;       // rows per head of k and v
  uint32_t first_slot = 0;        // the window tokens folded: slots first_slot ..
  uint32_t length = 0;
  uint32_t first_index = 0;       // .. which become middle tokens first_index ..
  uint32_t middle_stride = 0;     // tokens per dim's run of the packed middles (> first_index + length - 1; even in f16)
  Dtype dtype = Dtype::F32;       // of k, v and the packed middles
};

struct FourierFoldArgs {
  View k, v;                            // [num_heads][slot_stride][head_dim]
  View k_dims, v_dims;                  // uint32 [num_heads][head_dim]: compressed dims first
  View k_coefficients, v_coefficients;  // f32 [num_heads][2N][compressed]: read and written
  View k_packed, v_packed;              // [num_heads][head_dim - compressed][middle_stride]: the tokens folded are written
};

void fourier_fold(Backend& backend, const FourierFoldShape& shape, const FourierFoldArgs& args);
// The reference: hippo_fourier_project_cpu, then gather_dims_cpu, for K and then V.
void fourier_fold_cpu(const FourierFoldShape& shape, const FourierFoldArgs& args);
void fourier_fold_vulkan(Backend& backend, const FourierFoldShape& shape, const FourierFoldArgs& args);

}  // namespace kvc::ops
