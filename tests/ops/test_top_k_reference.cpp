// The CPU top-k against its definition: position i of a row is selected iff fewer than k
// positions rank before it, where j ranks before i when its (priority flag, score) is larger,
// or equal with j < i. Counted directly in O(n^2), without sorting.
#include <doctest/doctest.h>

#include <algorithm>

#include "ops/top_k.h"
#include "support/selection_support.h"

namespace kvc {
namespace {

std::vector<uint32_t> top_k_by_definition(const std::vector<float>& scores, const std::vector<uint32_t>& priority,
                                          uint32_t priority_min, uint32_t length, uint32_t k) {
  std::vector<uint32_t> selected;
  for (uint32_t i = 0; i < length; ++i) {
    uint32_t before = 0;
    for (uint32_t j = 0; j < length; ++j) {
      const bool flag_i = !priority.empty() && priority[i] >= priority_min;
      const bool flag_j = !priority.empty() && priority[j] >= priority_min;
      if (flag_j != flag_i) before += flag_j;
      else if (scores[j] != scores[i]) before += scores[j] > scores[i];
      else before += j < i;
    }
    if (before < k) selected.push_back(i);
  }
  return selected;
}

}  // namespace

TEST_CASE("top_k_cpu selects by (priority, score), ties to the earlier position, ascending") {
  for (test::ScorePattern pattern : {test::ScorePattern::Random, test::ScorePattern::FourLevels, test::ScorePattern::AllEqual,
                                     test::ScorePattern::MostlyZero})
    for (bool with_priority : {false, true})
      for (uint32_t length : {1u, 9u, 150u})
        for (uint32_t k : {0u, 1u, length / 3, length}) {
          const uint32_t rows = 2, stride = length + 2, index_stride = k + 1;
          std::vector<float> scores = test::patterned_scores(size_t(rows) * stride, pattern);
          std::vector<uint32_t> priority(size_t(rows) * stride);
          for (uint32_t& count : priority) count = test::rng()() % 5;
          auto score_tensor = test::tensor_of(test::cpu_backend(), scores);
          auto priority_tensor = test::tensor_of(test::cpu_backend(), priority);
          auto indices = test::make_poisoned(test::cpu_backend(), size_t(rows) * index_stride * 4);
          const ops::TopKShape shape{rows, length, stride, k, index_stride, 2};
          ops::top_k(test::cpu_backend(), shape,
                     {view(*score_tensor), with_priority ? view(*priority_tensor) : View{}, view(*indices)});
          const std::vector<uint32_t> got = test::read_as<uint32_t>(test::cpu_backend(), *indices, size_t(rows) * index_stride);
          for (uint32_t row = 0; row < rows; ++row) {
            const std::vector<float> row_scores(scores.begin() + row * stride, scores.begin() + row * stride + length);
            const std::vector<uint32_t> row_priority =
                with_priority ? std::vector<uint32_t>(priority.begin() + row * stride, priority.begin() + row * stride + length)
                              : std::vector<uint32_t>();
            INFO("pattern ", int(pattern), " priority ", with_priority, " length ", length, " k ", k, " row ", row);
            CHECK(std::vector<uint32_t>(got.begin() + row * index_stride, got.begin() + row * index_stride + k) ==
                  top_k_by_definition(row_scores, row_priority, 2, length, k));
          }
        }
}

TEST_CASE("top_k_cpu reads and writes rows in blocks") {
  // 5 rows in blocks of 2 (the last one short): block b's rows from b * block_stride, its
  // indices from b * index_block_stride; every row selected by the definition, with one k for
  // every row and with a k for each block (none for the middle one).
  const uint32_t rows = 5, length = 40, stride = 43, k = 11, index_stride = 12;
  for (const std::vector<uint32_t>& block_k : {std::vector<uint32_t>{}, std::vector<uint32_t>{11, 0, 7}}) {
    const ops::TopKShape shape{rows, length, stride, k, index_stride, 0, 2, 2 * stride + 9, 2 * index_stride + 5, block_k};
    const size_t elements = ops::top_k_row_start(shape, rows - 1, stride, shape.block_stride) + stride;
    const size_t index_elements = ops::top_k_row_start(shape, rows - 1, index_stride, shape.index_block_stride) + index_stride;
    CHECK(ops::top_k_row_start(shape, 3, stride, shape.block_stride) == shape.block_stride + stride);
    const std::vector<float> scores = test::patterned_scores(elements, test::ScorePattern::FourLevels);
    auto score_tensor = test::tensor_of(test::cpu_backend(), scores);
    auto indices = test::make_poisoned(test::cpu_backend(), index_elements * 4);
    ops::top_k(test::cpu_backend(), shape, {view(*score_tensor), View{}, view(*indices)});
    const std::vector<uint32_t> got = test::read_as<uint32_t>(test::cpu_backend(), *indices, index_elements);
    for (uint32_t row = 0; row < rows; ++row) {
      const size_t in = ops::top_k_row_start(shape, row, stride, shape.block_stride);
      const size_t out = ops::top_k_row_start(shape, row, index_stride, shape.index_block_stride);
      const uint32_t row_k = block_k.empty() ? k : block_k[row / 2];
      CHECK(ops::top_k_row_k(shape, row) == row_k);
      INFO("row ", row, " k ", row_k);
      CHECK(std::vector<uint32_t>(got.begin() + out, got.begin() + out + row_k) ==
            top_k_by_definition(std::vector<float>(scores.begin() + in, scores.begin() + in + length), {}, 0, length, row_k));
      // Past a row's k nothing is written.
      CHECK(std::all_of(got.begin() + out + row_k, got.begin() + out + index_stride, [](uint32_t word) { return word == test::kPoisonWord; }));
    }
  }
}

TEST_CASE("top_k refuses k past the row length, too many rows, blocks shorter than their rows and k's not one a block") {
  Tensor dummy(test::cpu_backend(), 64);
  CHECK_THROWS_AS(ops::top_k(test::cpu_backend(), {1, 4, 4, 5, 5, 0}, {view(dummy), View{}, view(dummy)}), Error);
  CHECK_THROWS_AS(ops::top_k(test::cpu_backend(), {70000, 1, 1, 1, 1, 0}, {view(dummy), View{}, view(dummy)}), Error);
  CHECK_THROWS_AS(ops::top_k(test::cpu_backend(), {4, 4, 4, 1, 1, 0, 2, 7, 2}, {view(dummy), View{}, view(dummy)}), Error);
  CHECK_THROWS_AS(ops::top_k(test::cpu_backend(), {4, 4, 4, 1, 1, 0, 2, 8, 1}, {view(dummy), View{}, view(dummy)}), Error);
  // A k a block: one too few, one past k, and more blocks than push constants hold.
  CHECK_THROWS_AS(ops::top_k(test::cpu_backend(), {4, 4, 4, 2, 2, 0, 2, 8, 4, {1}}, {view(dummy), View{}, view(dummy)}), Error);
  CHECK_THROWS_AS(ops::top_k(test::cpu_backend(), {4, 4, 4, 2, 2, 0, 2, 8, 4, {1, 3}}, {view(dummy), View{}, view(dummy)}), Error);
  CHECK_THROWS_AS(ops::top_k(test::cpu_backend(), {24, 1, 1, 1, 1, 0, 1, 1, 1, std::vector<uint32_t>(24, 1)},
                             {view(dummy), View{}, view(dummy)}),
                  Error);
}

}  // namespace kvc
