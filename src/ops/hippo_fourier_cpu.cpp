// The references: direct sums in double over eq. 4's columns, O(N L) per dim, so that the
// FFT route and the GPU kernels have an exact-as-possible target.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "ops/hippo_fourier.h"

namespace kvc::ops {
namespace {

uint32_t dim_of(const HippoFourierShape& shape, const View& dims, uint32_t head, uint32_t j) {
  return dims.host<uint32_t>()[size_t(head) * shape.head_dim + j];
}

float row_element(const HippoFourierShape& shape, const HippoFourierSegment& segment, const View& rows, uint32_t head,
                  uint32_t token, uint32_t dim) {
  const size_t slot = size_t(head) * segment.slot_stride + segment.first_slot + token;
  return load_element(rows.host<void>(), shape.dtype, slot * shape.head_dim + dim);
}

// Eq. 4's basis at indices first_index .. first_index + length - 1, [i][n]: computed once per
// call and shared by every head and dim (the trigonometry was nearly all of the references'
// time), with the same values hippo_fourier_basis gives.
struct BasisTable {
  std::vector<double> cos, sin;
};

BasisTable basis_table(const HippoFourierShape& shape, uint32_t length, uint32_t first_index) {
  BasisTable table{std::vector<double>(size_t(length) * shape.num_states), std::vector<double>(size_t(length) * shape.num_states)};
  for (uint32_t i = 0; i < length; ++i)
    for (uint32_t n = 0; n < shape.num_states; ++n) {
      const size_t at = size_t(i) * shape.num_states + n;
      hippo_fourier_basis(n, uint64_t(first_index) + i, shape.window_length, table.cos[at], table.sin[at]);
    }
  return table;
}

// F^T C over the table's indices for dim j of `head`, unstandardized.
std::vector<double> inverse_of(const HippoFourierShape& shape, const BasisTable& basis, const float* coefficients, uint32_t head,
                               uint32_t j) {
  const float* c = coefficients + size_t(head) * 2 * shape.num_states * shape.num_dims;
  std::vector<double> values(basis.cos.size() / shape.num_states, 0.0);
  for (size_t i = 0; i < values.size(); ++i)
    for (uint32_t n = 0; n < shape.num_states; ++n) {
      const size_t at = i * shape.num_states + n;
      values[i] += basis.cos[at] * c[size_t(2 * n) * shape.num_dims + j] + basis.sin[at] * c[size_t(2 * n + 1) * shape.num_dims + j];
    }
  return values;
}

}  // namespace

void hippo_fourier_basis(uint32_t n, uint64_t index, uint32_t window_length, double& cos_value, double& sin_value) {
  const uint64_t turn = (uint64_t(n) * index) % window_length;
  const double angle = 2.0 * M_PI * static_cast<double>(turn) / window_length;
  cos_value = std::cos(angle);
  sin_value = std::sin(angle);
}

void hippo_fourier_project_cpu(const HippoFourierShape& shape, const HippoFourierSegment& segment,
                               const HippoFourierProjectArgs& args) {
  const double inv_window = 1.0 / shape.window_length;
  const BasisTable basis = basis_table(shape, segment.length, segment.first_index);
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    float* c = args.coefficients.host<float>() + size_t(head) * 2 * shape.num_states * shape.num_dims;
    for (uint32_t j = 0; j < shape.num_dims; ++j) {
      const uint32_t dim = dim_of(shape, args.dims, head, j);
      for (uint32_t n = 0; n < shape.num_states; ++n) {
        double cos_sum = 0.0, sin_sum = 0.0;
        for (uint32_t i = 0; i < segment.length; ++i) {
          const size_t at = size_t(i) * shape.num_states + n;
          const double x = row_element(shape, segment, args.rows, head, i, dim);
          cos_sum += basis.cos[at] * x;
          sin_sum += basis.sin[at] * x;
        }
        c[size_t(2 * n) * shape.num_dims + j] += static_cast<float>(cos_sum * inv_window);
        c[size_t(2 * n + 1) * shape.num_dims + j] += static_cast<float>(sin_sum * inv_window);
      }
    }
  }
}

void hippo_fourier_fit_cpu(const HippoFourierShape& shape, const HippoFourierSegment& segment, const HippoFourierFitArgs& args) {
  const BasisTable basis = basis_table(shape, segment.length, segment.first_index);
  for (uint32_t head = 0; head < shape.num_heads; ++head)
    for (uint32_t j = 0; j < shape.num_dims; ++j) {
      const uint32_t dim = dim_of(shape, args.dims, head, j);
      const std::vector<double> inverse = inverse_of(shape, basis, args.coefficients.host<float>(), head, j);
      std::vector<double> x(segment.length);
      double mean_x = 0.0, mean_r = 0.0;
      for (uint32_t i = 0; i < segment.length; ++i) {
        x[i] = row_element(shape, segment, args.rows, head, i, dim);
        mean_x += x[i];
        mean_r += inverse[i];
      }
      mean_x /= segment.length;
      mean_r /= segment.length;
      double var_x = 0.0, var_r = 0.0;
      for (uint32_t i = 0; i < segment.length; ++i) {
        var_x += (x[i] - mean_x) * (x[i] - mean_x);
        var_r += (inverse[i] - mean_r) * (inverse[i] - mean_r);
      }
      const double scale = var_r > 0.0 ? std::sqrt(var_x / var_r) : 0.0;
      const double offset = mean_x - scale * mean_r;
      double squared_error = 0.0;
      for (uint32_t i = 0; i < segment.length; ++i) {
        const double error = scale * inverse[i] + offset - x[i];
        squared_error += error * error;
      }
      float* affine = args.affine.host<float>() + size_t(head) * 2 * shape.num_dims;
      affine[j] = static_cast<float>(scale);
      affine[shape.num_dims + j] = static_cast<float>(offset);
      args.squared_error.host<float>()[size_t(head) * shape.num_dims + j] = static_cast<float>(squared_error / segment.length);
    }
}

std::vector<float> hippo_fourier_reconstruct_host(const HippoFourierShape& shape, uint32_t length, uint32_t first_index,
                                                  const float* coefficients, const float* affine) {
  std::vector<float> out(size_t(shape.num_heads) * length * shape.num_dims);
  const BasisTable basis = basis_table(shape, length, first_index);
  for (uint32_t head = 0; head < shape.num_heads; ++head)
    for (uint32_t j = 0; j < shape.num_dims; ++j) {
      const std::vector<double> inverse = inverse_of(shape, basis, coefficients, head, j);
      const float* head_affine = affine + size_t(head) * 2 * shape.num_dims;
      const double scale = head_affine[j], offset = head_affine[shape.num_dims + j];
      for (uint32_t i = 0; i < length; ++i)
        out[(size_t(head) * length + i) * shape.num_dims + j] = static_cast<float>(scale * inverse[i] + offset);
    }
  return out;
}

void hippo_fourier_reconstruct_cpu(const HippoFourierShape& shape, const HippoFourierSegment& segment,
                                   const HippoFourierReconstructArgs& args) {
  const std::vector<float> out = hippo_fourier_reconstruct_host(shape, segment.length, segment.first_index,
                                                                args.coefficients.host<float>(), args.affine.host<float>());
  std::copy(out.begin(), out.end(), args.out.host<float>());
}

void hippo_fourier_choose_dims_cpu(const HippoFourierShape& shape, const HippoFourierChooseArgs& args) {
  std::vector<uint32_t> order(shape.head_dim);
  for (uint32_t head = 0; head < shape.num_heads; ++head) {
    const float* error = args.squared_error.host<float>() + size_t(head) * shape.head_dim;
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return error[a] < error[b]; });
    std::sort(order.begin(), order.begin() + shape.num_dims);
    std::sort(order.begin() + shape.num_dims, order.end());
    std::copy(order.begin(), order.end(), args.dims.host<uint32_t>() + size_t(head) * shape.head_dim);
  }
}

std::shared_ptr<void> hippo_fourier_prepare(Backend& backend, const HippoFourierShape& shape) {
  return backend.is_cpu() ? nullptr : hippo_fourier_prepare_vulkan(backend, shape);
}

void require_segment_in_window(uint32_t window_length, uint32_t first_index, uint32_t length) {
  require(window_length <= (1u << 24) && uint64_t(first_index) + length <= window_length, KVC_ERROR_INTERNAL, [&] {
    return "hippo_fourier: tokens " + std::to_string(first_index) + " .. " + std::to_string(uint64_t(first_index) + length) +
           " must lie inside the window (T = " + std::to_string(window_length) + ", at most 2^24)";
  });
}

void hippo_fourier_project(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                           const HippoFourierProjectArgs& args) {
  require_segment_in_window(shape.window_length, segment.first_index, segment.length);
  if (backend.is_cpu()) hippo_fourier_project_cpu(shape, segment, args);
  else hippo_fourier_project_vulkan(backend, shape, segment, args);
}

void hippo_fourier_fit(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                       const HippoFourierFitArgs& args) {
  require_segment_in_window(shape.window_length, segment.first_index, segment.length);
  if (backend.is_cpu()) hippo_fourier_fit_cpu(shape, segment, args);
  else hippo_fourier_fit_vulkan(backend, shape, segment, args);
}

void hippo_fourier_choose_dims(Backend& backend, const HippoFourierShape& shape, const HippoFourierChooseArgs& args) {
  if (backend.is_cpu()) hippo_fourier_choose_dims_cpu(shape, args);
  else hippo_fourier_choose_dims_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
