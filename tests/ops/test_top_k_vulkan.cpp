// Vulkan top-k against the CPU reference: the same positions, exactly, on random and tied
// score patterns, with and without HitKV's priority, up to rows of 128K and k of 8192.
#include <doctest/doctest.h>

#include "ops/top_k.h"
#include "support/selection_support.h"

namespace kvc {
namespace {

void check_against_cpu(const ops::TopKShape& shape, test::ScorePattern pattern, bool with_priority) {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const size_t elements = size_t(shape.num_rows) * shape.row_stride;
  const std::vector<float> scores = test::patterned_scores(elements, pattern);
  std::vector<uint32_t> priority(elements);
  for (uint32_t& count : priority) count = test::rng()() % 4;
  std::vector<std::vector<uint32_t>> results;
  for (Backend* backend : {&test::cpu_backend(), gpu}) {
    auto score_tensor = test::tensor_of(*backend, scores);
    auto priority_tensor = test::tensor_of(*backend, priority);
    auto indices = test::make_poisoned(*backend, size_t(shape.num_rows) * shape.index_stride * 4);
    backend->begin();
    ops::top_k(*backend, shape, {view(*score_tensor), with_priority ? view(*priority_tensor) : View{}, view(*indices)});
    backend->submit();
    const std::vector<uint32_t> all = test::read_as<uint32_t>(*backend, *indices, size_t(shape.num_rows) * shape.index_stride);
    std::vector<uint32_t> written;  // the first k of each row; the rest stays poisoned on both
    for (uint32_t row = 0; row < shape.num_rows; ++row)
      written.insert(written.end(), all.begin() + size_t(row) * shape.index_stride, all.begin() + size_t(row) * shape.index_stride + shape.k);
    results.push_back(written);
  }
  INFO("rows ", shape.num_rows, " length ", shape.row_length, " k ", shape.k, " pattern ", int(pattern), " priority ", with_priority);
  CHECK(results[0] == results[1]);
}

}  // namespace

TEST_CASE("top_k on Vulkan selects exactly the CPU's positions") {
  for (test::ScorePattern pattern : {test::ScorePattern::Random, test::ScorePattern::FourLevels, test::ScorePattern::AllEqual,
                                     test::ScorePattern::MostlyZero})
    for (bool with_priority : {false, true}) {
      check_against_cpu({3, 1, 1, 1, 1, 2}, pattern, with_priority);
      check_against_cpu({5, 1000, 1003, 97, 100, 2}, pattern, with_priority);
      check_against_cpu({2, 4099, 4099, 4099, 4099, 1}, pattern, with_priority);
      check_against_cpu({130, 2311, 2311, 1024, 1024, 3}, pattern, with_priority);
    }
  check_against_cpu({1, 131072, 131072, 8192, 8192, 2}, test::ScorePattern::Random, true);
  check_against_cpu({1, 131071, 131072, 8191, 8192, 2}, test::ScorePattern::FourLevels, false);
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
