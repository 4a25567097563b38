// Vulkan gather against the CPU reference: a copy with conversions, so byte-equal, with
// packed f16 rows of odd length (words shared by two rows), dim-major runs that start or end
// mid-word, and the poison around them.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "ops/gather_dims.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("gather_dims on Vulkan writes exactly the CPU's bytes") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const ops::GatherDimsShape shapes[] = {{3, 24, 17, 4, 9, 24, 5, 13, 12, 2, Dtype::F32, Dtype::F16},
                                         {2, 128, 300, 1, 299, 128, 70, 57, 300, 0, Dtype::F16, Dtype::F16},
                                         {5, 16, 40, 39, 1, 16, 0, 11, 41, 40, Dtype::F16, Dtype::F32},
                                         {1, 128, 1024, 0, 1024, 128, 0, 128, 1024, 0, Dtype::F32, Dtype::F32},
                                         // heads' f16 regions abutting mid-word (3 x 13 elements each): one word, two heads
                                         {4, 16, 3, 0, 3, 16, 0, 13, 3, 0, Dtype::F32, Dtype::F16},
                                         // dim-major: runs of 9 rows from slot 2, of 299 from 0, of 1 at the odd slot 41, of 6 from 3
                                         {3, 24, 17, 4, 9, 24, 5, 13, 12, 2, Dtype::F32, Dtype::F16, true},
                                         {2, 128, 300, 1, 299, 128, 70, 57, 300, 0, Dtype::F16, Dtype::F16, true},
                                         {5, 16, 40, 39, 1, 16, 0, 11, 42, 41, Dtype::F16, Dtype::F16, true},
                                         {3, 24, 17, 4, 6, 24, 5, 13, 12, 3, Dtype::F32, Dtype::F16, true},  // from mid-word, 3 words
                                         {2, 40, 33, 3, 30, 40, 1, 39, 35, 5, Dtype::F16, Dtype::F32, true}};
  for (const ops::GatherDimsShape& shape : shapes) {
    std::vector<float> in = test::random_floats(size_t(shape.num_heads) * shape.in_slot_stride * shape.in_row_elements);
    const std::vector<unsigned char> in_bytes = test::encode(in, shape.in_dtype);
    std::vector<uint32_t> dims(size_t(shape.num_heads) * shape.dims_row);
    for (uint32_t head = 0; head < shape.num_heads; ++head) {
      auto row = dims.begin() + size_t(head) * shape.dims_row;
      std::iota(row, row + shape.dims_row, 0u);
      std::shuffle(row, row + shape.dims_row, test::rng());
    }
    const size_t out_bytes = size_t(shape.num_heads) * shape.out_slot_stride * shape.num_dims * dtype_size(shape.out_dtype);
    std::vector<std::vector<unsigned char>> results;
    for (Backend* backend : {&test::cpu_backend(), gpu}) {
      auto in_t = test::tensor_of(*backend, in_bytes), dims_t = test::tensor_of(*backend, dims);
      auto out = test::make_poisoned(*backend, out_bytes);
      backend->begin();
      ops::gather_dims(*backend, shape, {view(*in_t), view(*dims_t), view(*out)});
      backend->submit();
      results.push_back(test::read_tensor(*backend, *out, out_bytes));
    }
    INFO("seed ", test::seed(), " heads ", shape.num_heads, " rows ", shape.num_rows, " dims ", shape.num_dims, " ",
         std::string(dtype_name(shape.in_dtype)), " -> ", std::string(dtype_name(shape.out_dtype)), shape.out_dim_major ? " dim-major" : "");
    CHECK(results[0] == results[1]);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
