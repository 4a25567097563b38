// Vulkan HiPPO-FourierT against the CPU reference on the same random rows: the prefill
// projection, eq. 6's one-token update at late basis indices, and the fit.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "ops/hippo_fourier.h"
#include "support/selection_support.h"

namespace kvc {
namespace {

struct FourierProblem {
  ops::HippoFourierShape shape;
  ops::HippoFourierSegment segment;
};

struct FourierOutputs {
  std::vector<float> coefficients, affine, squared_error;
};

// Projects `segment` onto coefficients that already hold random values (so the op must add,
// not overwrite), then fits on it; returns every output.
FourierOutputs run(Backend& backend, const FourierProblem& problem, const std::vector<unsigned char>& rows,
                   const std::vector<uint32_t>& dims, const std::vector<float>& initial) {
  const ops::HippoFourierShape& shape = problem.shape;
  auto rows_t = test::tensor_of(backend, rows), dims_t = test::tensor_of(backend, dims);
  auto coefficients = test::tensor_of(backend, initial);
  const size_t per_dim = size_t(shape.num_heads) * shape.num_dims;
  auto affine = test::make_poisoned(backend, per_dim * 8), error = test::make_poisoned(backend, per_dim * 4);
  std::vector<uint32_t> bins(shape.num_states);
  std::iota(bins.begin(), bins.end(), 0u);
  auto bins_t = test::tensor_of(backend, bins);
  backend.begin();
  ops::hippo_fourier_project(backend, shape, problem.segment, {view(*rows_t), view(*dims_t), view(*coefficients), view(*bins_t)});
  ops::hippo_fourier_fit(backend, shape, problem.segment,
                         {view(*rows_t), view(*dims_t), view(*coefficients), view(*affine), view(*error)});
  backend.submit();
  return {test::read_as<float>(backend, *coefficients, initial.size()), test::read_as<float>(backend, *affine, per_dim * 2),
          test::read_as<float>(backend, *error, per_dim)};
}

}  // namespace

TEST_CASE("hippo_fourier project and fit on Vulkan match the CPU reference, both routes") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // A prefill segment over a prime window, a short odd one in f16, one token at a late index
  // of a long window (eq. 6 in decode; the exact angle reduction), and head_dim 128 with 70
  // dims; odd dim counts leave the Transform route's last pair half empty; 200 of 256 dims take
  // two of the Direct projection's 128-dim blocks.
  const FourierProblem bases[] = {{{3, 24, 13, 257, 17, Dtype::F32}, {101, 5, 91, 0}},
                                  {{2, 40, 7, 100, 40, Dtype::F16}, {37, 1, 35, 2}},
                                  {{5, 16, 33, 100003, 11, Dtype::F32}, {9, 4, 1, 99871}},
                                  {{1, 128, 64, 4099, 70, Dtype::F16}, {700, 13, 640, 17}},
                                  {{2, 256, 20, 1031, 200, Dtype::F16}, {50, 3, 41, 700}}};
  std::vector<FourierProblem> problems;
  for (const FourierProblem& base : bases)
    for (const ops::HippoFourierRoute route : {ops::HippoFourierRoute::Direct, ops::HippoFourierRoute::Transform}) {
      problems.push_back(base);
      problems.back().shape.route = route;
    }
  // One token at a late index of a window near the longest (T = 2^24 - 3): n t reaches 1e10, far past
  // 32 bits, so a wrong reduction of the angle shows (Direct only: a Transform would plan a
  // length-T FFT).
  problems.push_back({{2, 16, 600, 16777213, 9, Dtype::F32}, {9, 4, 1, 16777000}});
  problems.back().shape.route = ops::HippoFourierRoute::Direct;
  for (const FourierProblem& problem : problems) {
    const ops::HippoFourierShape& shape = problem.shape;
    const ops::HippoFourierRoute route = shape.route;
    std::vector<float> rows = test::random_floats(size_t(shape.num_heads) * problem.segment.slot_stride * shape.head_dim);
    const std::vector<unsigned char> row_bytes = test::encode(rows, shape.dtype);
    std::vector<uint32_t> dims(size_t(shape.num_heads) * shape.head_dim);
    for (uint32_t head = 0; head < shape.num_heads; ++head) {
      auto row = dims.begin() + size_t(head) * shape.head_dim;
      std::iota(row, row + shape.head_dim, 0u);
      std::shuffle(row, row + shape.head_dim, test::rng());
    }
    // Prior coefficients of the size a segment's own have: sums of about L / 2 terms over T.
    const float prior = 0.5f * problem.segment.length / shape.window_length;
    const std::vector<float> initial =
        test::random_floats(size_t(shape.num_heads) * 2 * shape.num_states * shape.num_dims, -prior, prior);
    const FourierOutputs cpu = run(test::cpu_backend(), problem, row_bytes, dims, initial);
    const FourierOutputs vulkan = run(*gpu, problem, row_bytes, dims, initial);
    // std::string: doctest prints a const char* as its address.
    INFO("seed ", test::seed(), " ", std::string(dtype_name(shape.dtype)), " N ", shape.num_states, " T ", shape.window_length,
         " L ", problem.segment.length, " first index ", problem.segment.first_index, " route ",
         std::string(route == ops::HippoFourierRoute::Direct ? "direct" : "transform"));
    // The kernels sum L (up to 640) f32 products with cos and sin accurate to 3e-8, and the
    // fit merges Welford moments of 2N-term reconstructions, where the reference works in
    // double: rounding of order sqrt(L) ulp, 2e-7 measured on lavapipe. 1e-5 of the largest
    // value leaves room for other summation orders; a wrong bin, index or dim errs by O(1).
    CHECK(test::relative_max_error(vulkan.coefficients, cpu.coefficients) < 1e-5);
    CHECK(test::relative_max_error(vulkan.affine, cpu.affine) < 1e-5);
    CHECK(test::relative_max_error(vulkan.squared_error, cpu.squared_error) < 1e-5);
  }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("hippo_fourier_choose_dims on Vulkan picks the CPU's dims, ties included") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const ops::HippoFourierShape shapes[] = {{3, 40, 1, 2, 29, Dtype::F32}, {8, 128, 1, 2, 102, Dtype::F32}, {2, 256, 1, 2, 1, Dtype::F32}};
  for (const ops::HippoFourierShape& shape : shapes)
    for (test::ScorePattern pattern : {test::ScorePattern::Random, test::ScorePattern::FourLevels, test::ScorePattern::AllEqual}) {
      const std::vector<float> errors = test::patterned_scores(size_t(shape.num_heads) * shape.head_dim, pattern);
      std::vector<std::vector<uint32_t>> results;
      for (Backend* backend : {&test::cpu_backend(), gpu}) {
        auto error_t = test::tensor_of(*backend, errors);
        auto dims_t = test::make_poisoned(*backend, errors.size() * 4);
        backend->begin();
        ops::hippo_fourier_choose_dims(*backend, shape, {view(*error_t), view(*dims_t)});
        backend->submit();
        results.push_back(test::read_as<uint32_t>(*backend, *dims_t, errors.size()));
      }
      INFO("seed ", test::seed(), " heads ", shape.num_heads, " head_dim ", shape.head_dim, " compressed ", shape.num_dims);
      CHECK(results[0] == results[1]);
    }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
