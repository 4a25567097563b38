// The CPU HiPPO-FourierT against FourierAttention's formulas built as matrices in long double
// (tests/support/formulas): eq. 4's projection, eq. 6's per-token update, eq. 5's
// reconstruction with appendix D's standardization, and sec. 3.4's reconstruction error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/hippo_fourier.h"
#include "support/formulas.h"
#include "support/selection_support.h"

namespace kvc {
namespace {

// Random rows and a random dims permutation per head for one shape and segment.
struct HippoCase {
  ops::HippoFourierShape shape;
  ops::HippoFourierSegment segment;
  std::vector<float> rows;       // [heads][slot_stride][head_dim], rounded to the dtype
  std::vector<uint32_t> dims;    // [heads][head_dim]

  HippoCase(const ops::HippoFourierShape& shape_in, const ops::HippoFourierSegment& segment_in)
      : shape(shape_in), segment(segment_in) {
    rows = test::random_floats(size_t(shape.num_heads) * segment.slot_stride * shape.head_dim);
    dims.resize(size_t(shape.num_heads) * shape.head_dim);
    for (uint32_t head = 0; head < shape.num_heads; ++head) {
      auto row = dims.begin() + size_t(head) * shape.head_dim;
      std::iota(row, row + shape.head_dim, 0u);
      std::shuffle(row, row + shape.head_dim, test::rng());
    }
  }

  std::vector<long double> sequence(uint32_t head, uint32_t j) const {
    std::vector<long double> x(segment.length);
    const uint32_t dim = dims[size_t(head) * shape.head_dim + j];
    for (uint32_t i = 0; i < segment.length; ++i)
      x[i] = rows[(size_t(head) * segment.slot_stride + segment.first_slot + i) * shape.head_dim + dim];
    return x;
  }
};

struct Tensors {
  std::unique_ptr<Tensor> rows, dims, coefficients;
};

Tensors upload(Backend& backend, HippoCase& c, const std::vector<float>& coefficients) {
  std::vector<float> rows = c.rows;
  const std::vector<unsigned char> row_bytes = test::encode(rows, c.shape.dtype);
  c.rows = rows;
  return {test::tensor_of(backend, row_bytes), test::tensor_of(backend, c.dims), test::tensor_of(backend, coefficients)};
}

size_t coefficient_count(const ops::HippoFourierShape& shape) {
  return size_t(shape.num_heads) * 2 * shape.num_states * shape.num_dims;
}

// The coefficients are sums of L terms of size <= 1 divided by T, rounded to f32 once from
// double: 1e-6 of their largest magnitude bounds that rounding with room to spare.
constexpr double kCoefficientTolerance = 1e-6;

}  // namespace

TEST_CASE("hippo_fourier_project_cpu is eq. 4's (1/T) F X on the chosen dims") {
  const ops::HippoFourierShape shapes[] = {{3, 24, 13, 257, 17, Dtype::F32}, {2, 40, 7, 100, 40, Dtype::F16}};
  for (const ops::HippoFourierShape& shape : shapes) {
    HippoCase c(shape, {101, 5, 91, 0});
    Backend& cpu = test::cpu_backend();
    Tensors t = upload(cpu, c, std::vector<float>(coefficient_count(shape), 0.0f));
    ops::hippo_fourier_project(cpu, shape, c.segment, {view(*t.rows), view(*t.dims), view(*t.coefficients)});
    const std::vector<float> got = test::read_as<float>(cpu, *t.coefficients, coefficient_count(shape));
    std::vector<float> expected(got.size());
    for (uint32_t head = 0; head < shape.num_heads; ++head)
      for (uint32_t j = 0; j < shape.num_dims; ++j) {
        const std::vector<long double> formula =
            test::fourier_coefficients_by_formula(c.sequence(head, j), shape.num_states, 0, shape.window_length);
        for (uint32_t r = 0; r < 2 * shape.num_states; ++r)
          expected[(size_t(head) * 2 * shape.num_states + r) * shape.num_dims + j] = static_cast<float>(formula[r]);
      }
    INFO("seed ", test::seed(), " ", std::string(dtype_name(shape.dtype)), " N ", shape.num_states, " T ", shape.window_length);
    CHECK(test::relative_max_error(got, expected) < kCoefficientTolerance);
  }
}

TEST_CASE("hippo_fourier project and fit refuse a segment outside the window and change nothing") {
  // The shaders reduce n t mod T exactly only for indices below T <= 2^24: the ops' contract,
  // checked before either backend runs.
  const ops::HippoFourierShape shape{2, 16, 5, 100, 9, Dtype::F32};
  HippoCase c(shape, {40, 3, 20, 81});  // tokens 81 .. 100 of a window of 100
  Backend& cpu = test::cpu_backend();
  const std::vector<float> initial(coefficient_count(shape), 0.25f);
  Tensors t = upload(cpu, c, initial);
  CHECK_THROWS_AS(ops::hippo_fourier_project(cpu, shape, c.segment, {view(*t.rows), view(*t.dims), view(*t.coefficients)}), Error);
  CHECK_THROWS_AS(ops::hippo_fourier_fit(cpu, shape, c.segment, {view(*t.rows), view(*t.dims), view(*t.coefficients)}), Error);
  ops::HippoFourierShape too_long = shape;
  too_long.window_length = (1u << 24) + 1;
  c.segment.first_index = 0;
  CHECK_THROWS_AS(ops::hippo_fourier_project(cpu, too_long, c.segment, {view(*t.rows), view(*t.dims), view(*t.coefficients)}), Error);
  CHECK(test::read_as<float>(cpu, *t.coefficients, initial.size()) == initial);
}

TEST_CASE("hippo_fourier_project_cpu: eq. 6 one token at a time adds up to the whole segment's eq. 4") {
  const ops::HippoFourierShape shape{2, 16, 11, 301, 9, Dtype::F32};
  HippoCase c(shape, {250, 3, 200, 0});
  Backend& cpu = test::cpu_backend();
  Tensors whole = upload(cpu, c, std::vector<float>(coefficient_count(shape), 0.0f));
  ops::hippo_fourier_project(cpu, shape, c.segment, {view(*whole.rows), view(*whole.dims), view(*whole.coefficients)});

  // The first 150 tokens at prefill, then each later token as it leaves the local window: token
  // i is column i of F (appendix C, eq. 12).
  Tensors stepped = upload(cpu, c, std::vector<float>(coefficient_count(shape), 0.0f));
  const ops::HippoFourierProjectArgs args{view(*stepped.rows), view(*stepped.dims), view(*stepped.coefficients)};
  const uint32_t prefill = 150;
  ops::hippo_fourier_project(cpu, shape, {c.segment.slot_stride, c.segment.first_slot, prefill, 0}, args);
  for (uint32_t i = prefill; i < c.segment.length; ++i)
    ops::hippo_fourier_project(cpu, shape, {c.segment.slot_stride, c.segment.first_slot + i, 1, i}, args);

  const size_t count = coefficient_count(shape);
  INFO("seed ", test::seed());
  // 51 f32 additions of terms each rounded once: a few ulps of the largest coefficient.
  CHECK(test::relative_max_error(test::read_as<float>(cpu, *stepped.coefficients, count),
                                 test::read_as<float>(cpu, *whole.coefficients, count)) < 1e-5);
}

TEST_CASE("hippo_fourier_reconstruct_cpu is eq. 5's F^T C, standardized by appendix D's affine map") {
  const ops::HippoFourierShape shape{3, 8, 9, 127, 5, Dtype::F32};
  const ops::HippoFourierSegment segment{0, 0, 33, 60};
  const std::vector<float> coefficients = test::random_floats(coefficient_count(shape));
  const std::vector<float> affine = test::random_floats(size_t(shape.num_heads) * shape.num_dims * 2);
  Backend& cpu = test::cpu_backend();
  auto c_tensor = test::tensor_of(cpu, coefficients), a_tensor = test::tensor_of(cpu, affine);
  const size_t out_count = size_t(shape.num_heads) * segment.length * shape.num_dims;
  auto out = test::make_poisoned(cpu, out_count * 4);
  ops::hippo_fourier_reconstruct_cpu(shape, segment, {view(*c_tensor), view(*a_tensor), view(*out)});
  const std::vector<float> got = test::read_as<float>(cpu, *out, out_count);
  std::vector<float> expected(out_count);
  for (uint32_t head = 0; head < shape.num_heads; ++head)
    for (uint32_t j = 0; j < shape.num_dims; ++j) {
      std::vector<long double> column(2 * shape.num_states);
      for (uint32_t r = 0; r < column.size(); ++r) column[r] = coefficients[(size_t(head) * column.size() + r) * shape.num_dims + j];
      const std::vector<long double> inverse =
          test::fourier_inverse_by_formula(column, segment.length, segment.first_index, shape.window_length);
      const float scale = affine[size_t(head) * 2 * shape.num_dims + j];
      const float offset = affine[(size_t(head) * 2 + 1) * shape.num_dims + j];
      for (uint32_t i = 0; i < segment.length; ++i)
        expected[(size_t(head) * segment.length + i) * shape.num_dims + j] = static_cast<float>(scale * inverse[i] + offset);
    }
  INFO("seed ", test::seed());
  // Sums of 2N products in double, rounded once to f32.
  CHECK(test::relative_max_error(got, expected) < 1e-6);
}

TEST_CASE("hippo_fourier_fit_cpu matches the segment's moments and the standardized reconstruction error") {
  const ops::HippoFourierShape shape{2, 16, 6, 211, 16, Dtype::F16};
  HippoCase c(shape, {90, 7, 77, 0});
  Backend& cpu = test::cpu_backend();
  Tensors t = upload(cpu, c, std::vector<float>(coefficient_count(shape), 0.0f));
  ops::hippo_fourier_project(cpu, shape, c.segment, {view(*t.rows), view(*t.dims), view(*t.coefficients)});
  const size_t per_dim = size_t(shape.num_heads) * shape.num_dims;
  auto affine = test::make_poisoned(cpu, per_dim * 8), error = test::make_poisoned(cpu, per_dim * 4);
  ops::hippo_fourier_fit(cpu, shape, c.segment, {view(*t.rows), view(*t.dims), view(*t.coefficients), view(*affine), view(*error)});
  const std::vector<float> coefficients = test::read_as<float>(cpu, *t.coefficients, coefficient_count(shape));
  const std::vector<float> affine_got = test::read_as<float>(cpu, *affine, per_dim * 2);
  const std::vector<float> error_got = test::read_as<float>(cpu, *error, per_dim);
  std::vector<float> affine_expected(per_dim * 2), error_expected(per_dim);
  for (uint32_t head = 0; head < shape.num_heads; ++head)
    for (uint32_t j = 0; j < shape.num_dims; ++j) {
      const std::vector<long double> x = c.sequence(head, j);
      std::vector<long double> column(2 * shape.num_states);
      for (uint32_t r = 0; r < column.size(); ++r) column[r] = coefficients[(size_t(head) * column.size() + r) * shape.num_dims + j];
      const std::vector<long double> r = test::fourier_inverse_by_formula(column, c.segment.length, 0, shape.window_length);
      const long double length = c.segment.length;
      const long double mean_x = std::accumulate(x.begin(), x.end(), 0.0L) / length;
      const long double mean_r = std::accumulate(r.begin(), r.end(), 0.0L) / length;
      long double var_x = 0, var_r = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        var_x += (x[i] - mean_x) * (x[i] - mean_x) / length;
        var_r += (r[i] - mean_r) * (r[i] - mean_r) / length;
      }
      const long double scale = std::sqrt(var_x / var_r), offset = mean_x - scale * mean_r;
      long double squared = 0;
      for (size_t i = 0; i < x.size(); ++i) squared += (scale * r[i] + offset - x[i]) * (scale * r[i] + offset - x[i]) / length;
      affine_expected[size_t(head) * 2 * shape.num_dims + j] = static_cast<float>(scale);
      affine_expected[(size_t(head) * 2 + 1) * shape.num_dims + j] = static_cast<float>(offset);
      error_expected[size_t(head) * shape.num_dims + j] = static_cast<float>(squared);
    }
  INFO("seed ", test::seed());
  // Double sums over 77 tokens, rounded once to f32.
  CHECK(test::relative_max_error(affine_got, affine_expected) < 1e-5);
  CHECK(test::relative_max_error(error_got, error_expected) < 1e-5);
}

TEST_CASE("hippo_fourier: a segment filling the window with only the first N bins is reconstructed exactly") {
  // Over a whole period F's rows are orthogonal with norm T/2 (T for bin 0), so F^T C is
  // x with bins 1.. halved; with the mean and one other bin, appendix D's affine map undoes that.
  const uint32_t window = 64, states = 5;
  for (uint32_t bin : {1u, 4u}) {
    const ops::HippoFourierShape shape{1, 8, states, window, 1, Dtype::F32};
    HippoCase c(shape, {window, 0, window, 0});
    const uint32_t dim = c.dims[0];
    for (uint32_t t = 0; t < window; ++t)
      c.rows[size_t(t) * shape.head_dim + dim] = 0.25f + 0.5f * static_cast<float>(std::cos(2.0 * M_PI * bin * t / window + 0.3));
    Backend& cpu = test::cpu_backend();
    Tensors t = upload(cpu, c, std::vector<float>(coefficient_count(shape), 0.0f));
    ops::hippo_fourier_project(cpu, shape, c.segment, {view(*t.rows), view(*t.dims), view(*t.coefficients)});
    auto affine = test::make_poisoned(cpu, 8), error = test::make_poisoned(cpu, 4);
    ops::hippo_fourier_fit(cpu, shape, c.segment, {view(*t.rows), view(*t.dims), view(*t.coefficients), view(*affine), view(*error)});
    auto out = test::make_poisoned(cpu, size_t(window) * 4);
    ops::hippo_fourier_reconstruct_cpu(shape, c.segment, {view(*t.coefficients), view(*affine), view(*out)});
    std::vector<float> expected(window);
    for (uint32_t i = 0; i < window; ++i) expected[i] = c.rows[size_t(i) * shape.head_dim + dim];
    INFO("bin ", bin);
    CHECK(test::relative_max_error(test::read_as<float>(cpu, *out, window), expected) < 1e-5);
    CHECK(test::read_as<float>(cpu, *error, 1)[0] < 1e-10);
  }
}

TEST_CASE("hippo_fourier_choose_dims_cpu compresses the dims that err least, ties to the lower dim") {
  const ops::HippoFourierShape shape{3, 40, 1, 2, 29, Dtype::F32};
  for (test::ScorePattern pattern : {test::ScorePattern::Random, test::ScorePattern::FourLevels}) {
    const std::vector<float> errors = test::patterned_scores(size_t(shape.num_heads) * shape.head_dim, pattern);
    Backend& cpu = test::cpu_backend();
    auto error_t = test::tensor_of(cpu, errors);
    auto dims_t = test::make_poisoned(cpu, errors.size() * 4);
    ops::hippo_fourier_choose_dims(cpu, shape, {view(*error_t), view(*dims_t)});
    const std::vector<uint32_t> dims = test::read_as<uint32_t>(cpu, *dims_t, errors.size());
    for (uint32_t head = 0; head < shape.num_heads; ++head) {
      const float* error = errors.data() + size_t(head) * shape.head_dim;
      const auto row = dims.begin() + size_t(head) * shape.head_dim;
      std::vector<uint32_t> sorted(row, row + shape.head_dim);
      std::sort(sorted.begin(), sorted.end());
      std::vector<uint32_t> every(shape.head_dim);
      std::iota(every.begin(), every.end(), 0u);
      INFO("head ", head);
      CHECK(sorted == every);
      CHECK(std::is_sorted(row, row + shape.num_dims));
      CHECK(std::is_sorted(row + shape.num_dims, row + shape.head_dim));
      // Every compressed dim errs less than every other, or as much at a lower index.
      for (uint32_t a = 0; a < shape.num_dims; ++a)
        for (uint32_t b = shape.num_dims; b < shape.head_dim; ++b)
          CHECK((error[row[a]] < error[row[b]] || (error[row[a]] == error[row[b]] && row[a] < row[b])));
    }
  }
}

}  // namespace kvc
