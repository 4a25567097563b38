// Vulkan FourierAttention fold against the CPU reference (hippo_fourier_project, then
// gather_dims, for K and V): coefficients that already hold values (the fold adds), packed
// middles whose other tokens must keep their bytes, f16 tokens that share a word with one the
// fold does not write (odd first indices and lengths), segments of one token (a decode step)
// and of several, late basis indices, and 200 of 256 dims (two dim blocks).
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "ops/fourier_fold.h"
#include "support/selection_support.h"

namespace kvc {
namespace {

struct FoldOutputs {
  std::vector<float> k_coefficients, v_coefficients;
  std::vector<unsigned char> k_packed, v_packed;
};

FoldOutputs run(Backend& backend, const ops::FourierFoldShape& shape, const std::vector<unsigned char>& k,
                const std::vector<unsigned char>& v, const std::vector<uint32_t>& k_dims, const std::vector<uint32_t>& v_dims,
                const std::vector<float>& k_initial, const std::vector<float>& v_initial, const std::vector<unsigned char>& k_packed,
                const std::vector<unsigned char>& v_packed) {
  auto k_t = test::tensor_of(backend, k), v_t = test::tensor_of(backend, v);
  auto k_dims_t = test::tensor_of(backend, k_dims), v_dims_t = test::tensor_of(backend, v_dims);
  auto k_c = test::tensor_of(backend, k_initial), v_c = test::tensor_of(backend, v_initial);
  auto k_p = test::tensor_of(backend, k_packed), v_p = test::tensor_of(backend, v_packed);
  backend.begin();
  ops::fourier_fold(backend, shape,
                    {view(*k_t), view(*v_t), view(*k_dims_t), view(*v_dims_t), view(*k_c), view(*v_c), view(*k_p), view(*v_p)});
  backend.submit();
  return {test::read_as<float>(backend, *k_c, k_initial.size()), test::read_as<float>(backend, *v_c, v_initial.size()),
          test::read_tensor(backend, *k_p, k_packed.size()), test::read_tensor(backend, *v_p, v_packed.size())};
}

}  // namespace

TEST_CASE("fourier_fold on Vulkan matches projecting and packing K and V on the CPU") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // heads, head_dim, N, T, K and V compressed, slot stride, first slot, length, first index, middle stride, dtype
  const ops::FourierFoldShape shapes[] = {
      {8, 128, 64, 32768, 102, 103, 40, 7, 1, 30001, 30008, Dtype::F16},  // a decode step: V's 25 dims a token, mid-word
      {3, 24, 13, 257, 17, 20, 31, 2, 5, 100, 120, Dtype::F32},
      {4, 16, 9, 64, 3, 8, 9, 0, 5, 0, 6, Dtype::F16},  // runs of 5 tokens: each run's last word half written
      {2, 256, 20, 1031, 200, 231, 50, 3, 2, 700, 704, Dtype::F16},
      {2, 256, 9, 300, 100, 40, 64, 3, 40, 10, 60, Dtype::F16},  // 40 tokens (past a basis chunk); both parts' second dim blocks only pack
      {3, 40, 11, 200, 30, 25, 20, 1, 6, 101, 112, Dtype::F16},  // 6 tokens from an odd index: words over bin blocks
  };
  for (const ops::FourierFoldShape& shape : shapes) {
    const size_t rows = size_t(shape.num_heads) * shape.slot_stride * shape.head_dim;
    // encode rounds its input to the dtype in place.
    auto encoded = [&](size_t elements) {
      std::vector<float> values = test::random_floats(elements);
      return test::encode(values, shape.dtype);
    };
    const std::vector<unsigned char> k = encoded(rows), v = encoded(rows);
    std::vector<uint32_t> k_dims(size_t(shape.num_heads) * shape.head_dim), v_dims(k_dims.size());
    for (std::vector<uint32_t>* dims : {&k_dims, &v_dims})
      for (uint32_t head = 0; head < shape.num_heads; ++head) {
        auto row = dims->begin() + size_t(head) * shape.head_dim;
        std::iota(row, row + shape.head_dim, 0u);
        std::shuffle(row, row + shape.head_dim, test::rng());
      }
    // Prior coefficients of the size the segment's own share has (sums of L terms over T), so
    // that an error in it, at a late basis index too, is not lost in the prior's rounding; packed
    // middles of random values, which every row but the folded ones must keep.
    const float prior = float(shape.length) / shape.window_length;
    auto coefficients = [&](uint32_t compressed) {
      return test::random_floats(size_t(shape.num_heads) * 2 * shape.num_states * compressed, -prior, prior);
    };
    auto packed = [&](uint32_t compressed) { return encoded(size_t(shape.num_heads) * shape.middle_stride * (shape.head_dim - compressed)); };
    const std::vector<float> k_initial = coefficients(shape.key_compressed), v_initial = coefficients(shape.value_compressed);
    const std::vector<unsigned char> k_packed = packed(shape.key_compressed);
    const std::vector<unsigned char> v_packed = packed(shape.value_compressed);
    const FoldOutputs cpu = run(test::cpu_backend(), shape, k, v, k_dims, v_dims, k_initial, v_initial, k_packed, v_packed);
    const FoldOutputs vulkan = run(*gpu, shape, k, v, k_dims, v_dims, k_initial, v_initial, k_packed, v_packed);
    INFO("seed ", test::seed(), " heads ", shape.num_heads, " head_dim ", shape.head_dim, " N ", shape.num_states, " T ",
         shape.window_length, " length ", shape.length, " first index ", shape.first_index, " ", std::string(dtype_name(shape.dtype)));
    // As hippo_fourier_project's test: f32 sums of cos and sin products against double, a
    // rounding of a few ulp of the largest value; a wrong bin, index or dim errs by O(1).
    CHECK(test::relative_max_error(vulkan.k_coefficients, cpu.k_coefficients) < 1e-5);
    CHECK(test::relative_max_error(vulkan.v_coefficients, cpu.v_coefficients) < 1e-5);
    CHECK(vulkan.k_packed == cpu.k_packed);
    CHECK(vulkan.v_packed == cpu.v_packed);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
