#include <vector>

#include "ops/sequence_transform.h"

namespace kvc::ops {

void sequence_transform_cpu(const SequenceTransformShape& shape, const SequenceTransformArgs& args) {
  const size_t dim = shape.head_dim;
  const float* matrix = args.matrix.host<float>();
  const void* in = args.in.host<void>();
  void* out = args.out.host<void>();
  std::vector<float> rows(size_t(shape.in_length) * dim);
  std::vector<double> sum(dim);
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    const size_t in_base = size_t(head) * shape.in_head_stride * dim, out_base = size_t(head) * shape.out_head_stride * dim;
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = load_element(in, shape.dtype, in_base + i);
    for (uint32_t r = 0; r < shape.out_length; ++r) {
      std::fill(sum.begin(), sum.end(), 0.0);
      const float* weights = matrix + size_t(r) * shape.in_length;
      for (uint32_t n = 0; n < shape.in_length; ++n)
        for (size_t d = 0; d < dim; ++d) sum[d] += double(weights[n]) * rows[n * dim + d];
      for (size_t d = 0; d < dim; ++d) store_element(out, shape.dtype, out_base + r * dim + d, static_cast<float>(sum[d]));
    }
  }
}

void sequence_transform(Backend& backend, const SequenceTransformShape& shape, const SequenceTransformArgs& args) {
  if (backend.is_cpu()) sequence_transform_cpu(shape, args);
  else sequence_transform_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
