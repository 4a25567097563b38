#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/segment_spectrum.h"

namespace kvc::ops {

// The formula in double, one bin at a time: the reference the FFT route is tested against.
void segment_spectrum_cpu(const SegmentSpectrumShape& shape, const SegmentSpectrumArgs& args) {
  const void* states = args.states.host<void>();
  const uint32_t* bins = args.bins.host<uint32_t>();
  float* spectrum = args.spectrum.host<float>();
  std::vector<double> re(shape.head_dim), im(shape.head_dim);
  for (uint32_t head = 0; head < shape.num_heads; ++head)
    for (uint32_t b = 0; b < shape.num_bins; ++b) {
      std::fill(re.begin(), re.end(), 0.0);
      std::fill(im.begin(), im.end(), 0.0);
      for (uint32_t n = 0; n < shape.length; ++n) {
        // The phase reduced modulo T in integers first, so long windows keep their precision.
        const uint64_t turn = uint64_t(bins[b]) * (shape.window_offset + n) % shape.transform_length;
        const double angle = -2.0 * M_PI * double(turn) / shape.transform_length;
        const double c = std::cos(angle), s = std::sin(angle);
        const size_t row = (size_t(head) * shape.slot_stride + shape.first_slot + n) * shape.head_dim;
        for (uint32_t d = 0; d < shape.head_dim; ++d) {
          const double x = load_element(states, shape.dtype, row + d);
          re[d] += x * c;
          im[d] += x * s;
        }
      }
      float* out = spectrum + (size_t(head) * shape.num_bins + b) * shape.head_dim * 2;
      for (uint32_t d = 0; d < shape.head_dim; ++d) {
        out[2 * d] = float(re[d] * shape.scale);
        out[2 * d + 1] = float(im[d] * shape.scale);
      }
    }
}

std::shared_ptr<void> segment_spectrum_keep(Backend& backend, const SegmentSpectrumShape& shape) {
  return backend.is_cpu() ? nullptr : segment_spectrum_keep_vulkan(backend, shape);
}

void segment_spectrum(Backend& backend, const SegmentSpectrumShape& shape, const SegmentSpectrumArgs& args) {
  if (backend.is_cpu()) segment_spectrum_cpu(shape, args);
  else segment_spectrum_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
