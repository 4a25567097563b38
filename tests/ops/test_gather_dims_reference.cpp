// The CPU gather against its definition: row i's u-th element is the input row's
// dims[first_dim + u]-th, converted to the output dtype, at out[h][i][u] or (dim-major)
// out[h][u][i]; rows outside the range keep their poison.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "ops/gather_dims.h"
#include "support/selection_support.h"

namespace kvc {

TEST_CASE("gather_dims_cpu packs the chosen dims of a row range, converting dtypes") {
  for (Dtype in_dtype : {Dtype::F32, Dtype::F16})
    for (Dtype out_dtype : {Dtype::F32, Dtype::F16})
    for (bool dim_major : {false, true}) {
      const ops::GatherDimsShape shape{3, 24, 17, 4, 9, 24, 5, 13, 12, 2, in_dtype, out_dtype, dim_major};
      std::vector<float> in = test::random_floats(size_t(shape.num_heads) * shape.in_slot_stride * shape.in_row_elements);
      const std::vector<unsigned char> in_bytes = test::encode(in, in_dtype);
      std::vector<uint32_t> dims(size_t(shape.num_heads) * shape.dims_row);
      for (uint32_t head = 0; head < shape.num_heads; ++head) {
        auto row = dims.begin() + size_t(head) * shape.dims_row;
        std::iota(row, row + shape.dims_row, 0u);
        std::shuffle(row, row + shape.dims_row, test::rng());
      }
      Backend& cpu = test::cpu_backend();
      const size_t out_count = size_t(shape.num_heads) * shape.out_slot_stride * shape.num_dims;
      auto in_t = test::tensor_of(cpu, in_bytes), dims_t = test::tensor_of(cpu, dims);
      auto out = test::make_poisoned(cpu, out_count * dtype_size(out_dtype));
      const std::vector<float> poison = test::decode(test::read_tensor(cpu, *out, out_count * dtype_size(out_dtype)), out_dtype);
      ops::gather_dims(cpu, shape, {view(*in_t), view(*dims_t), view(*out)});
      const std::vector<float> got = test::decode(test::read_tensor(cpu, *out, out_count * dtype_size(out_dtype)), out_dtype);
      for (uint32_t head = 0; head < shape.num_heads; ++head)
        for (uint32_t slot = 0; slot < shape.out_slot_stride; ++slot)
          for (uint32_t u = 0; u < shape.num_dims; ++u) {
            const size_t at = dim_major ? (size_t(head) * shape.num_dims + u) * shape.out_slot_stride + slot
                                        : (size_t(head) * shape.out_slot_stride + slot) * shape.num_dims + u;
            const float value = got[at];
            INFO(std::string(dtype_name(in_dtype)), " -> ", std::string(dtype_name(out_dtype)), dim_major ? " dim-major" : "", " head ",
                 head, " slot ", slot, " u ", u);
            if (slot < shape.out_first_slot || slot >= shape.out_first_slot + shape.num_rows) {
              CHECK(std::memcmp(&value, &poison[at], sizeof(float)) == 0);
              continue;
            }
            const uint32_t row = shape.in_first_slot + slot - shape.out_first_slot;
            const uint32_t dim = dims[size_t(head) * shape.dims_row + shape.first_dim + u];
            std::vector<float> expected{in[(size_t(head) * shape.in_slot_stride + row) * shape.in_row_elements + dim]};
            test::encode(expected, out_dtype);
            CHECK(value == expected[0]);
          }
    }
}

}  // namespace kvc
