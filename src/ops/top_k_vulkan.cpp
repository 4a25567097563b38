// One workgroup per row: a radix select (three histogram passes, of 11, 11 and 10 bits) finds
// the k-th largest key and how many keys equal to it to take, then one ordered pass writes the
// selection.
#include <algorithm>

#include "ops/radix_select_vulkan.h"
#include "ops/top_k.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kRunLength = 8;  // consecutive positions per thread in the write pass

struct TopKPush {
  uint32_t row_length, row_stride, k, index_stride, priority_min;
  uint32_t rows_per_block, block_stride, index_block_stride;
  uint32_t block_ks;  // entries of block_k (0: every row keeps k)
  uint32_t block_k[kTopKMaxBlockKs];
};
static_assert(sizeof(TopKPush) <= 128, "the push constants every Vulkan device takes");

}  // namespace

void top_k_vulkan(Backend& backend, const TopKShape& shape, const TopKArgs& args) {
  if (shape.num_rows == 0 || shape.k == 0) return;
  // One block of every row is blocks of num_rows rows.
  const uint32_t rows_per_block = shape.rows_per_block ? shape.rows_per_block : shape.num_rows;
  TopKPush push{shape.row_length, shape.row_stride, shape.k, shape.index_stride, shape.priority_min,
                rows_per_block,   shape.block_stride, shape.index_block_stride, uint32_t(shape.block_k.size()), {}};
  std::copy(shape.block_k.begin(), shape.block_k.end(), push.block_k);
  const bool has_priority = static_cast<bool>(args.priority);
  const uint32_t threads = radix_select_workgroup(backend.device(), "top_k");
  backend.recorder().dispatch({"top_k", 3, sizeof(TopKPush), {threads, kRunLength, has_priority}},
                              {slice(args.scores), slice_or(args.priority, args.scores), slice(args.indices)}, &push,
                              shape.num_rows);
}

}  // namespace kvc::ops
