#include "support/fourier_case.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/gather_dims.h"
#include "ops/hippo_fourier.h"
#include "support/selection_support.h"

namespace kvc::test {
namespace {

struct MiddleState {
  std::vector<float> packed, coefficients, affine;
  std::vector<uint32_t> dims;
};

// Random middle rows of one tensor (K or V) turned into what a compressed layer holds.
MiddleState compress_random_middle(const ops::FourierAttentionShape& shape, uint32_t compressed, float low, float high) {
  const uint32_t dim = shape.head_dim, kept = dim - compressed, heads = shape.num_kv_heads;
  MiddleState state;
  std::vector<float> rows = random_floats(size_t(heads) * shape.num_middle * dim, low, high);
  state.dims.resize(size_t(heads) * dim);
  for (uint32_t head = 0; head < heads; ++head) {
    auto row = state.dims.begin() + size_t(head) * dim;
    std::iota(row, row + dim, 0u);
    std::shuffle(row, row + dim, rng());
  }
  Backend& cpu = cpu_backend();
  auto rows_t = tensor_of(cpu, rows), dims_t = tensor_of(cpu, state.dims);
  const ops::HippoFourierShape fourier{heads, dim, shape.num_states, shape.window_length, compressed, Dtype::F32};
  const ops::HippoFourierSegment segment{shape.num_middle, 0, shape.num_middle, 0};
  auto coefficients = tensor_of(cpu, std::vector<float>(size_t(heads) * 2 * shape.num_states * compressed, 0.0f));
  auto affine = make_poisoned(cpu, size_t(heads) * 2 * compressed * 4), error = make_poisoned(cpu, size_t(heads) * compressed * 4);
  ops::hippo_fourier_project(cpu, fourier, segment, {view(*rows_t), view(*dims_t), view(*coefficients)});
  ops::hippo_fourier_fit(cpu, fourier, segment, {view(*rows_t), view(*dims_t), view(*coefficients), view(*affine), view(*error)});
  state.coefficients = read_as<float>(cpu, *coefficients, size_t(heads) * 2 * shape.num_states * compressed);
  state.affine = read_as<float>(cpu, *affine, size_t(heads) * 2 * compressed);
  // The slack past the middle NaN: a kernel that read it into a sum would show.
  const size_t packed_count = size_t(heads) * kept * shape.middle_stride;
  std::vector<float> nan_runs(packed_count, NAN);
  auto packed = tensor_of(cpu, encode(nan_runs, shape.dtype));
  const ops::GatherDimsShape gather{heads, dim, shape.num_middle, 0, shape.num_middle, dim, compressed, kept,
                                    shape.middle_stride, 0, Dtype::F32, shape.dtype, true};
  ops::gather_dims(cpu, gather, {view(*rows_t), view(*dims_t), view(*packed)});
  state.packed = decode(read_tensor(cpu, *packed, packed_count * dtype_size(shape.dtype)), shape.dtype);
  return state;
}

}  // namespace

FourierCase FourierCase::random(const ops::FourierAttentionShape& base_shape, float q_range) {
  FourierCase c;
  c.shape = base_shape;
  c.shape.slot_stride = base_shape.num_full_slots + 3;
  c.shape.middle_stride = std::max(8u, (base_shape.num_middle + 7) / 8 * 8);
  const ops::FourierAttentionShape& shape = c.shape;
  const size_t dim = shape.head_dim;
  c.q = random_floats(size_t(shape.num_q_heads) * dim, -q_range, q_range);
  encode(c.q, shape.dtype);
  c.k.assign(size_t(shape.num_kv_heads) * shape.slot_stride * dim, NAN);
  c.v = c.k;
  for (uint32_t kv = 0; kv < shape.num_kv_heads; ++kv) {
    for (uint32_t slot = 0; slot < shape.num_full_slots; ++slot) {
      const size_t row = size_t(kv) * shape.slot_stride + slot;
      std::vector<float> k_row = random_floats(dim), v_row = random_floats(dim, 0.0f, 1.0f);
      encode(k_row, shape.dtype);
      encode(v_row, shape.dtype);
      std::copy(k_row.begin(), k_row.end(), c.k.begin() + row * dim);
      std::copy(v_row.begin(), v_row.end(), c.v.begin() + row * dim);
    }
  }
  if (shape.num_middle > 0) {
    MiddleState keys = compress_random_middle(shape, shape.k_compressed, -1.0f, 1.0f);
    MiddleState values = compress_random_middle(shape, shape.v_compressed, 0.0f, 1.0f);
    c.k_middle = std::move(keys.packed);
    c.k_dims = std::move(keys.dims);
    c.k_coefficients = std::move(keys.coefficients);
    c.k_affine = std::move(keys.affine);
    c.v_middle = std::move(values.packed);
    c.v_dims = std::move(values.dims);
    c.v_coefficients = std::move(values.coefficients);
    c.v_affine = std::move(values.affine);
  }
  return c;
}

std::vector<float> FourierCase::run(Backend& backend) const {
  std::vector<float> q_copy = q, k_copy = k, v_copy = v, k_middle_copy = k_middle, v_middle_copy = v_middle;
  auto q_t = tensor_of(backend, encode(q_copy, shape.dtype));
  auto k_t = tensor_of(backend, encode(k_copy, shape.dtype)), v_t = tensor_of(backend, encode(v_copy, shape.dtype));
  const bool middle = shape.num_middle > 0;
  std::unique_ptr<Tensor> k_middle_t, v_middle_t, k_dims_t, v_dims_t, k_c, v_c, k_a, v_a;
  if (middle) {
    k_middle_t = tensor_of(backend, encode(k_middle_copy, shape.dtype));
    v_middle_t = tensor_of(backend, encode(v_middle_copy, shape.dtype));
    k_dims_t = tensor_of(backend, k_dims);
    v_dims_t = tensor_of(backend, v_dims);
    k_c = tensor_of(backend, k_coefficients);
    v_c = tensor_of(backend, v_coefficients);
    k_a = tensor_of(backend, k_affine);
    v_a = tensor_of(backend, v_affine);
  }
  // Kept through the call, as the policy keeps it: begin() drops plans nobody keeps.
  const std::shared_ptr<void> plan = ops::fourier_attention_prepare(backend, shape);
  auto optional = [](const std::unique_ptr<Tensor>& t) { return t ? view(*t) : View{}; };
  const size_t out_count = size_t(shape.num_q_heads) * shape.head_dim;
  auto out = make_poisoned(backend, out_count * dtype_size(shape.dtype));
  backend.begin();
  ops::fourier_attention(backend, shape,
                         {view(*q_t), view(*k_t), view(*v_t), optional(k_middle_t),
                          optional(v_middle_t), optional(k_dims_t), optional(v_dims_t), optional(k_c), optional(v_c),
                          optional(k_a), optional(v_a), view(*out)});
  backend.submit();
  return decode(read_tensor(backend, *out, out_count * dtype_size(shape.dtype)), shape.dtype);
}

}  // namespace kvc::test
