#include "ops/fourier_fold.h"

#include <string>
#include <tuple>

#include "ops/gather_dims.h"
#include "ops/hippo_fourier.h"

namespace kvc::ops {

void fourier_fold_cpu(const FourierFoldShape& shape, const FourierFoldArgs& args) {
  const HippoFourierSegment segment{shape.slot_stride, shape.first_slot, shape.length, shape.first_index};
  for (auto [compressed, rows, dims, coefficients, packed] :
       {std::tuple{shape.key_compressed, args.k, args.k_dims, args.k_coefficients, args.k_packed},
        std::tuple{shape.value_compressed, args.v, args.v_dims, args.v_coefficients, args.v_packed}}) {
    hippo_fourier_project_cpu({shape.num_heads, shape.head_dim, shape.num_states, shape.window_length, compressed, shape.dtype},
                              segment, {rows, dims, coefficients});
    gather_dims_cpu({shape.num_heads, shape.head_dim, shape.slot_stride, shape.first_slot, shape.length, shape.head_dim, compressed,
                     shape.head_dim - compressed, shape.middle_stride, shape.first_index, shape.dtype, shape.dtype, true},
                    {rows, dims, packed});
  }
}

void fourier_fold(Backend& backend, const FourierFoldShape& shape, const FourierFoldArgs& args) {
  require_segment_in_window(shape.window_length, shape.first_index, shape.length);
  require(shape.dtype != Dtype::F16 || shape.middle_stride % 2 == 0, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "fourier_fold: f16 packed middles need an even middle_stride, so no word holds two dims' runs (" +
           std::to_string(shape.middle_stride) + ")";
  });
  if (backend.is_cpu()) fourier_fold_cpu(shape, args);
  else fourier_fold_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
