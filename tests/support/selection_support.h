// Helpers for the tests of the selection ops: typed host vectors in and out of tensors, and
// random top-K lists as the top_k op writes them (distinct, ascending).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <memory>
#include <vector>

#include "support/test_support.h"

namespace kvc::test {

template <typename T>
std::unique_ptr<Tensor> tensor_of(Backend& backend, const std::vector<T>& values) {
  return make_tensor(backend, values.data(), values.size() * sizeof(T));
}

template <typename T>
std::vector<T> read_as(Backend& backend, const Tensor& tensor, size_t count) {
  const std::vector<unsigned char> bytes = read_tensor(backend, tensor, count * sizeof(T));
  std::vector<T> values(count);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// Every byte of `tensors`, one after another: the outputs of an op that must match exactly.
inline std::vector<unsigned char> read_all(Backend& backend, std::initializer_list<const Tensor*> tensors) {
  std::vector<unsigned char> all;
  for (const Tensor* tensor : tensors) {
    const std::vector<unsigned char> part = read_tensor(backend, *tensor, tensor->bytes());
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

// `rows` lists of `per_row` distinct keys below num_keys, ascending, each in a row of
// `stride` entries (the rest 0xffffffff, which no op may read).
inline std::vector<uint32_t> random_index_lists(size_t rows, uint32_t per_row, uint32_t stride, uint32_t num_keys) {
  std::vector<uint32_t> lists(rows * stride, 0xffffffffu), keys(num_keys);
  std::iota(keys.begin(), keys.end(), 0u);
  for (size_t row = 0; row < rows; ++row) {
    std::shuffle(keys.begin(), keys.end(), rng());
    std::sort(keys.begin(), keys.begin() + per_row);
    std::copy(keys.begin(), keys.begin() + per_row, lists.begin() + row * stride);
  }
  return lists;
}

// Non-negative scores the selection ops take, in patterns that stress the tie-break:
// distinct random values, four levels only (most keys tie), all equal, and mostly zero.
enum class ScorePattern { Random, FourLevels, AllEqual, MostlyZero };
inline std::vector<float> patterned_scores(size_t count, ScorePattern pattern) {
  std::vector<float> scores = random_floats(count, 0.0f, 1.0f);
  for (float& score : scores) {
    if (pattern == ScorePattern::FourLevels) score = std::floor(score * 4.0f) / 4.0f;
    if (pattern == ScorePattern::AllEqual) score = 0.5f;
    if (pattern == ScorePattern::MostlyZero) score = score < 0.9f ? 0.0f : score;
  }
  return scores;
}

}  // namespace kvc::test
