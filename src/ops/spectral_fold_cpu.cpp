#include <cmath>

#include "ops/spectral_fold.h"

namespace kvc::ops {

void spectral_fold_host(const SpectralFoldShape& shape, const void* k, const void* v, const uint32_t* bins, float* spectrum_k,
                        float* spectrum_v) {
  for (int tensor = 0; tensor < 2; ++tensor) {
    const void* rows = tensor == 0 ? k : v;
    float* spectrum = tensor == 0 ? spectrum_k : spectrum_v;
    for (uint32_t head = 0; head < shape.num_heads; ++head)
      for (uint32_t b = 0; b < shape.num_bins; ++b) {
        for (uint32_t d = 0; d < shape.head_dim; ++d) {
          float* state = spectrum + ((size_t(head) * shape.num_bins + b) * shape.head_dim + d) * 2;
          double re = state[0], im = state[1];
          for (uint32_t i = 0; i < shape.num_tokens; ++i) {
            const double folded = double(shape.folded + i);
            const uint32_t slot = shape.ring_first_slot + (shape.ring_start + i) % shape.ring_slots;
            const double x = load_element(rows, shape.dtype, (size_t(head) * shape.slot_stride + slot) * shape.head_dim + d);
            const uint64_t point = (shape.folded + i) % shape.segment_length;
            const double angle = -2.0 * M_PI * double(bins[b] * point % shape.segment_length) / shape.segment_length;
            re = (folded * re + x * std::cos(angle)) / (folded + 1);
            im = (folded * im + x * std::sin(angle)) / (folded + 1);
          }
          state[0] = float(re);
          state[1] = float(im);
        }
      }
  }
}

void spectral_fold_cpu(const SpectralFoldShape& shape, const SpectralFoldArgs& args) {
  spectral_fold_host(shape, args.k.host<void>(), args.v.host<void>(), args.bins.host<uint32_t>(), args.spectrum_k.host<float>(),
                     args.spectrum_v.host<float>());
}

void spectral_fold(Backend& backend, const SpectralFoldShape& shape, const SpectralFoldArgs& args) {
  if (backend.is_cpu()) spectral_fold_cpu(shape, args);
  else spectral_fold_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
