#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/fourier_attention.h"
#include "ops/hippo_fourier.h"
#include "ops/softmax_cpu.h"

namespace kvc::ops {
namespace {

// The middle keys (or values) of every kv head as attention sees them: [kv][num_middle][head_dim].
std::vector<float> materialize_middle(const FourierAttentionShape& shape, const View& packed, const View& dims,
                                      const View& coefficients, const View& affine, uint32_t compressed) {
  const uint32_t dim = shape.head_dim, kept = dim - compressed;
  const HippoFourierShape fourier{shape.num_kv_heads, dim, shape.num_states, shape.window_length, compressed, Dtype::F32};
  const std::vector<float> rebuilt =
      hippo_fourier_reconstruct_host(fourier, shape.num_middle, 0, coefficients.host<float>(), affine.host<float>());
  std::vector<float> rows(size_t(shape.num_kv_heads) * shape.num_middle * dim);
  for (uint32_t head = 0; head < shape.num_kv_heads; ++head) {
    const uint32_t* head_dims = dims.host<uint32_t>() + size_t(head) * dim;
    for (uint32_t t = 0; t < shape.num_middle; ++t) {
      float* row = &rows[(size_t(head) * shape.num_middle + t) * dim];
      for (uint32_t j = 0; j < compressed; ++j) row[head_dims[j]] = rebuilt[(size_t(head) * shape.num_middle + t) * compressed + j];
      for (uint32_t u = 0; u < kept; ++u)
        row[head_dims[compressed + u]] =
            load_element(packed.host<void>(), shape.dtype, (size_t(head) * kept + u) * shape.middle_stride + t);
    }
  }
  return rows;
}

}  // namespace

void fourier_attention_cpu(const FourierAttentionShape& shape, const FourierAttentionArgs& args) {
  const uint32_t dim = shape.head_dim, group = shape.num_q_heads / shape.num_kv_heads;
  const uint32_t total = shape.num_full_slots + shape.num_middle;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  const std::vector<float> middle_keys = shape.num_middle
      ? materialize_middle(shape, args.k_middle, args.k_dims, args.k_coefficients, args.k_affine, shape.k_compressed)
      : std::vector<float>();
  const std::vector<float> middle_values = shape.num_middle
      ? materialize_middle(shape, args.v_middle, args.v_dims, args.v_coefficients, args.v_affine, shape.v_compressed)
      : std::vector<float>();

  std::vector<float> keys(size_t(total) * dim), values(size_t(total) * dim), query(dim);
  std::vector<double> probs(total), acc(dim);
  for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head) {
    for (uint32_t slot = 0; slot < shape.num_full_slots; ++slot) {
      const size_t row = size_t(kv_head) * shape.slot_stride + slot;
      for (uint32_t d = 0; d < dim; ++d) {
        keys[size_t(slot) * dim + d] = load_element(args.k.host<void>(), shape.dtype, row * dim + d);
        values[size_t(slot) * dim + d] = load_element(args.v.host<void>(), shape.dtype, row * dim + d);
      }
    }
    const size_t middle_base = size_t(kv_head) * shape.num_middle * dim;
    std::copy_n(middle_keys.begin() + middle_base, size_t(shape.num_middle) * dim, keys.begin() + size_t(shape.num_full_slots) * dim);
    std::copy_n(middle_values.begin() + middle_base, size_t(shape.num_middle) * dim,
                values.begin() + size_t(shape.num_full_slots) * dim);
    for (uint32_t g = 0; g < group; ++g) {
      const size_t q_base = size_t(kv_head * group + g) * dim;
      for (uint32_t d = 0; d < dim; ++d) query[d] = load_element(args.q.host<void>(), shape.dtype, q_base + d);
      softmax_over_keys(query.data(), keys.data(), total, dim, scale, probs);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (uint32_t slot = 0; slot < total; ++slot)
        for (uint32_t d = 0; d < dim; ++d) acc[d] += probs[slot] * values[size_t(slot) * dim + d];
      for (uint32_t d = 0; d < dim; ++d) store_element(args.out.host<void>(), shape.dtype, q_base + d, static_cast<float>(acc[d]));
    }
  }
}

std::shared_ptr<void> fourier_attention_prepare(Backend& backend, const FourierAttentionShape& shape) {
  return backend.is_cpu() ? nullptr : fourier_attention_prepare_vulkan(backend, shape);
}

void fourier_attention(Backend& backend, const FourierAttentionShape& shape, const FourierAttentionArgs& args) {
  require(shape.middle_stride % 8 == 0, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "fourier_attention: the middle's runs start 16-byte aligned, so middle_stride is a multiple of 8 (" +
           std::to_string(shape.middle_stride) + ")";
  });
  require(shape.num_middle <= shape.window_length, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "fourier_attention: the middle's " + std::to_string(shape.num_middle) + " tokens pass the window of " +
           std::to_string(shape.window_length);
  });
  if (backend.is_cpu()) fourier_attention_cpu(shape, args);
  else fourier_attention_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
