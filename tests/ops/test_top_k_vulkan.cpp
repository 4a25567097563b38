// Vulkan top-k against the CPU reference: the same positions, exactly, on random and tied
// score patterns, with and without HitKV's priority, up to rows of 128K and k of 8192, rows
// in one block or in several, with one k or a k a block.
#include <doctest/doctest.h>

#include "ops/top_k.h"
#include "support/selection_support.h"

namespace kvc {
namespace {

void check_against_cpu(const ops::TopKShape& shape, test::ScorePattern pattern, bool with_priority) {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const uint32_t last = shape.num_rows - 1;
  const size_t elements = ops::top_k_row_start(shape, last, shape.row_stride, shape.block_stride) + shape.row_stride;
  const size_t index_elements = ops::top_k_row_start(shape, last, shape.index_stride, shape.index_block_stride) + shape.index_stride;
  const std::vector<float> scores = test::patterned_scores(elements, pattern);
  std::vector<uint32_t> priority(elements);
  for (uint32_t& count : priority) count = test::rng()() % 4;
  std::vector<std::vector<uint32_t>> results;
  for (Backend* backend : {&test::cpu_backend(), gpu}) {
    auto score_tensor = test::tensor_of(*backend, scores);
    auto priority_tensor = test::tensor_of(*backend, priority);
    auto indices = test::make_poisoned(*backend, index_elements * 4);
    backend->begin();
    ops::top_k(*backend, shape, {view(*score_tensor), with_priority ? view(*priority_tensor) : View{}, view(*indices)});
    backend->submit();
    // Every word: each row's first k written, the rest (past a row's k, between rows and
    // blocks) still poisoned on both.
    results.push_back(test::read_as<uint32_t>(*backend, *indices, index_elements));
  }
  INFO("rows ", shape.num_rows, " length ", shape.row_length, " k ", shape.k, " rows a block ", shape.rows_per_block, " pattern ",
       int(pattern), " priority ", with_priority);
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
      // Blocks of 3 rows (the last one short) at strides past their rows, as a selection's
      // layers lie in aligned parts of one buffer.
      check_against_cpu({7, 1000, 1001, 97, 99, 2, 3, 3 * 1001 + 61, 3 * 99 + 5}, pattern, with_priority);
      // A k a block, as a PyramidKV selection's layers keep (none for one of them).
      check_against_cpu({7, 1000, 1001, 97, 99, 2, 3, 3 * 1001 + 61, 3 * 99 + 5, {97, 0, 41}}, pattern, with_priority);
    }
  // As many blocks as one dispatch takes, each its own k.
  std::vector<uint32_t> block_k(ops::kTopKMaxBlockKs);
  for (uint32_t& k : block_k) k = 1 + test::rng()() % 300;
  check_against_cpu({2 * ops::kTopKMaxBlockKs, 777, 780, 300, 301, 2, 2, 2 * 780 + 64, 2 * 301, block_k}, test::ScorePattern::Random, true);
  check_against_cpu({1, 131072, 131072, 8192, 8192, 2}, test::ScorePattern::Random, true);
  check_against_cpu({1, 131071, 131072, 8191, 8192, 2}, test::ScorePattern::FourLevels, false);
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
