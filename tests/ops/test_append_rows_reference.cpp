// The CPU append against its definition: token t's row of kv head h lands in slot
// first_slot + t of that head with position first_position + t; no other slot changes. With
// RoPE the key lands rotated to that position, as the complex-rotation formula says.
#include <doctest/doctest.h>

#include <cmath>

#include "ops/append_rows.h"
#include "support/formulas.h"
#include "support/selection_support.h"

namespace kvc {

namespace {

// One append of random K and V on the CPU into poisoned storage: the inputs (rounded to the
// dtype) and everything the storage holds afterwards.
struct AppendRun {
  std::vector<float> k;                        // [token][kv head][dim]
  std::vector<unsigned char> k_bytes, v_bytes;  // as passed
  std::vector<unsigned char> k_got, v_got, poison_row;
  std::vector<int32_t> positions;
};

AppendRun append_random(const ops::AppendRowsShape& shape) {
  AppendRun run;
  const size_t row_bytes = shape.head_dim * dtype_size(shape.dtype), slots = size_t(shape.num_kv_heads) * shape.slot_stride;
  run.k = test::random_floats(size_t(shape.num_tokens) * shape.num_kv_heads * shape.head_dim);
  std::vector<float> v = test::random_floats(run.k.size());
  run.k_bytes = test::encode(run.k, shape.dtype);
  run.v_bytes = test::encode(v, shape.dtype);
  Backend& cpu = test::cpu_backend();
  auto k_in = test::tensor_of(cpu, run.k_bytes), v_in = test::tensor_of(cpu, run.v_bytes);
  auto k_cache = test::make_poisoned(cpu, slots * row_bytes), v_cache = test::make_poisoned(cpu, slots * row_bytes);
  auto positions = test::make_poisoned(cpu, slots * 4);
  run.poison_row = test::read_tensor(cpu, *k_cache, row_bytes);
  ops::append_rows(cpu, shape, {view(*k_in), view(*v_in), view(*k_cache), view(*v_cache), view(*positions)});
  run.k_got = test::read_as<unsigned char>(cpu, *k_cache, slots * row_bytes);
  run.v_got = test::read_as<unsigned char>(cpu, *v_cache, slots * row_bytes);
  run.positions = test::read_as<int32_t>(cpu, *positions, slots);
  return run;
}

}  // namespace

TEST_CASE("append_rows_cpu scatters token-major rows to head-major slots with consecutive positions") {
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    const ops::AppendRowsShape shape{3, 8, 19, 5, 11, 1000, dtype};
    const size_t row_bytes = shape.head_dim * dtype_size(dtype);
    const AppendRun run = append_random(shape);
    for (uint32_t head = 0; head < shape.num_kv_heads; ++head)
      for (uint32_t slot = 0; slot < shape.slot_stride; ++slot) {
        const size_t at = size_t(head) * shape.slot_stride + slot;
        const bool appended = slot >= shape.first_slot && slot < shape.first_slot + shape.num_tokens;
        INFO(std::string(dtype_name(dtype)), " head ", head, " slot ", slot);
        if (!appended) {
          CHECK(std::equal(run.poison_row.begin(), run.poison_row.end(), run.k_got.begin() + at * row_bytes));
          continue;
        }
        const uint32_t token = slot - shape.first_slot;
        const size_t from = (size_t(token) * shape.num_kv_heads + head) * row_bytes;
        CHECK(run.positions[at] == shape.first_position + int32_t(token));
        CHECK(std::equal(run.k_got.begin() + at * row_bytes, run.k_got.begin() + (at + 1) * row_bytes, run.k_bytes.begin() + from));
        CHECK(std::equal(run.v_got.begin() + at * row_bytes, run.v_got.begin() + (at + 1) * row_bytes, run.v_bytes.begin() + from));
      }
  }
}

TEST_CASE("append_rows_cpu with RoPE stores each key rotated to its position, values as they came") {
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (kvc_rope_style style : {KVC_ROPE_NEOX, KVC_ROPE_INTERLEAVED})
      for (uint32_t rotary_dims : {24u, 40u}) {
        ops::AppendRowsShape shape{2, 40, 23, 4, 13, 70001, dtype};
        shape.rope = {style, rotary_dims, 10000.0};
        const size_t dim = shape.head_dim, row_bytes = dim * dtype_size(dtype);
        const AppendRun run = append_random(shape);
        const std::vector<float> k_got = test::decode(run.k_got, dtype);
        for (uint32_t head = 0; head < shape.num_kv_heads; ++head)
          for (uint32_t token = 0; token < shape.num_tokens; ++token) {
            const size_t at = size_t(head) * shape.slot_stride + shape.first_slot + token;
            const size_t from = size_t(token) * shape.num_kv_heads + head;
            const std::vector<float> row(run.k.begin() + from * dim, run.k.begin() + (from + 1) * dim);
            const std::vector<float> expected = test::rope_by_formula(row, shape.rope, shape.first_position + int64_t(token));
            INFO(std::string(dtype_name(dtype)), " style ", style, " rotary dims ", rotary_dims, " head ", head, " token ", token);
            CHECK(run.positions[at] == shape.first_position + int32_t(token));
            // Half an ulp each: the stored key's rounding to the dtype (2^-24 of the value in
            // f32, 2^-11 in f16) and the formula's to f32 (2^-24).
            const double rounding = (dtype == Dtype::F32 ? 0x1p-24 : 0x1p-11) + 0x1p-24;
            for (size_t d = 0; d < dim; ++d)
              CHECK(std::fabs(k_got[at * dim + d] - expected[d]) <= rounding * std::fabs(expected[d]) + 1e-7);
            CHECK(std::equal(run.v_got.begin() + at * row_bytes, run.v_got.begin() + (at + 1) * row_bytes,
                             run.v_bytes.begin() + from * row_bytes));
          }
      }
}

}  // namespace kvc
