// The reference: per row, a partial sort of (key, position) pairs, then the chosen positions
// sorted ascending.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/top_k.h"

namespace kvc::ops {

void check_top_k_shape(const TopKShape& shape) {
  require(shape.num_rows <= 65535, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "top_k: " + std::to_string(shape.num_rows) + " rows; at most 65535";
  });
  require(shape.k <= shape.row_length, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "top_k: k = " + std::to_string(shape.k) + " exceeds the row length " + std::to_string(shape.row_length);
  });
  require(shape.row_length <= shape.row_stride && shape.k <= shape.index_stride, KVC_ERROR_INVALID_ARGUMENT,
          "top_k: a row or index stride is shorter than what it holds");
  const uint64_t blocks = shape.rows_per_block ? (uint64_t(shape.num_rows) + shape.rows_per_block - 1) / shape.rows_per_block : 1;
  require(shape.block_k.empty() || (shape.block_k.size() == blocks && shape.block_k.size() <= kTopKMaxBlockKs),
          KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "top_k: " + std::to_string(shape.block_k.size()) + " k's for " + std::to_string(blocks) +
         " blocks; one a block, at most " + std::to_string(kTopKMaxBlockKs);
  });
  for (uint32_t block_k : shape.block_k)
    require(block_k <= shape.k, KVC_ERROR_INVALID_ARGUMENT, [&] {
      return "top_k: a block's k (" + std::to_string(block_k) + ") exceeds k = " + std::to_string(shape.k);
    });
  require(shape.rows_per_block == 0 || (uint64_t(shape.block_stride) >= uint64_t(shape.rows_per_block) * shape.row_stride &&
                                        uint64_t(shape.index_block_stride) >= uint64_t(shape.rows_per_block) * shape.index_stride),
          KVC_ERROR_INVALID_ARGUMENT, "top_k: a block stride is shorter than its rows");
}

void top_k_cpu(const TopKShape& shape, const TopKArgs& args) {
  std::vector<std::pair<uint32_t, uint32_t>> ranked(shape.row_length);  // (key, position)
  for (uint32_t row = 0; row < shape.num_rows; ++row) {
    const size_t base = top_k_row_start(shape, row, shape.row_stride, shape.block_stride);
    for (uint32_t i = 0; i < shape.row_length; ++i) {
      uint32_t bits;
      std::memcpy(&bits, args.scores.host<float>() + base + i, 4);
      const bool flagged = args.priority && args.priority.host<uint32_t>()[base + i] >= shape.priority_min;
      ranked[i] = {(flagged ? 0x80000000u : 0u) | (bits & 0x7fffffffu), i};
    }
    auto before = [](const std::pair<uint32_t, uint32_t>& a, const std::pair<uint32_t, uint32_t>& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    };
    const uint32_t k = top_k_row_k(shape, row);
    std::partial_sort(ranked.begin(), ranked.begin() + k, ranked.end(), before);
    uint32_t* out = args.indices.host<uint32_t>() + top_k_row_start(shape, row, shape.index_stride, shape.index_block_stride);
    for (uint32_t i = 0; i < k; ++i) out[i] = ranked[i].second;
    std::sort(out, out + k);
  }
}

void top_k(Backend& backend, const TopKShape& shape, const TopKArgs& args) {
  check_top_k_shape(shape);
  if (backend.is_cpu()) top_k_cpu(shape, args);
  else top_k_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
