// decode_append on Vulkan (the token written inside attention_decode_append's dispatch) against the
// CPU reference (append_rows, then attention) on fresh random inputs: the output within
// attention's tolerance, and the layer's rows byte-equal to what Vulkan's own append_rows
// writes (the token's slot is poisoned before, so an unwritten row fails).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/decode_append.h"
#include "support/attention_case.h"
#include "support/selection_support.h"
#include "support/test_support.h"

namespace kvc {
namespace {

struct DecodeAppendResult {
  std::vector<float> out;
  std::vector<unsigned char> rows;  // the layer's K, V and positions after the call
};

// `problem`'s last slot is the token: its K and V (and kv head 0's position, which every kv
// head's last slot then carries) are the inputs, and the uploaded layer holds NaN there.
// `fused`: decode_append; else append_rows, then attention.
DecodeAppendResult run(Backend& backend, test::AttentionCase problem, bool fused) {
  const ops::AttentionShape& shape = problem.shape;
  const size_t dim = shape.head_dim, slots = shape.num_slots, last = slots - 1;
  std::vector<float> token_k(shape.num_kv_heads * dim), token_v(token_k.size());
  const int32_t position = problem.positions[last];
  for (size_t kv = 0; kv < shape.num_kv_heads; ++kv) {
    for (size_t d = 0; d < dim; ++d) {
      token_k[kv * dim + d] = problem.k[(kv * slots + last) * dim + d];
      token_v[kv * dim + d] = problem.v[(kv * slots + last) * dim + d];
      problem.k[(kv * slots + last) * dim + d] = NAN;
      problem.v[(kv * slots + last) * dim + d] = NAN;
    }
    problem.positions[kv * slots + last] = -1;
  }
  const test::AttentionTensors tensors = problem.upload(backend);
  auto k_in = test::make_tensor(backend, test::encode(token_k, shape.dtype).data(), token_k.size() * dtype_size(shape.dtype));
  auto v_in = test::make_tensor(backend, test::encode(token_v, shape.dtype).data(), token_v.size() * dtype_size(shape.dtype));
  ops::AppendRowsShape append;
  append.num_kv_heads = shape.num_kv_heads;
  append.head_dim = shape.head_dim;
  append.slot_stride = shape.slot_stride;
  append.first_slot = uint32_t(last);
  append.num_tokens = 1;
  append.first_position = position;
  append.dtype = shape.dtype;
  if (shape.keys_rotated) append.rope = shape.rope;
  const ops::AttentionArgs args = tensors.args();
  const ops::AppendEntry token{append, {view(*k_in), view(*v_in), args.k, args.v, args.positions, args.turn_table}};
  backend.begin();
  if (fused) {
    ops::decode_append(backend, shape, args, token);
  } else {
    ops::append_rows(backend, token.shape, token.args);
    ops::attention(backend, shape, args);
  }
  backend.submit();
  const size_t out_bytes = size_t(shape.num_q_heads) * dim * dtype_size(shape.dtype);
  return {test::decode(test::read_tensor(backend, *tensors.out, out_bytes), shape.dtype),
          test::read_all(backend, {tensors.k.get(), tensors.v.get(), tensors.positions.get()})};
}

void check_against_cpu(ops::AttentionShape shape) {
  shape.num_queries = 1;
  const test::AttentionCase problem = test::AttentionCase::random(shape);
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const DecodeAppendResult expected = run(test::cpu_backend(), problem, true);
  const DecodeAppendResult fused = run(*gpu, problem, true);
  const DecodeAppendResult apart = run(*gpu, problem, false);
  INFO("q_heads ", shape.num_q_heads, " kv_heads ", shape.num_kv_heads, " head_dim ", shape.head_dim, " slots ", shape.num_slots, " ",
       std::string(dtype_name(shape.dtype)), " rope ", shape.rope.style, "/", shape.rope.rotary_dims,
       std::string(shape.keys_rotated ? ", keys stored rotated" : ""));
  // attention's tolerances (test_attention_vulkan.cpp): f32 summation, f16 output rounding.
  CHECK(test::relative_max_error(fused.out, expected.out) < (shape.dtype == Dtype::F32 ? 1e-5 : 2e-3));
  CHECK(fused.rows == apart.rows);
  CHECK(test::relative_max_error(fused.out, apart.out) < (shape.dtype == Dtype::F32 ? 1e-5 : 2e-3));
}

ops::AttentionShape make_shape(uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim, uint32_t slots, Dtype dtype,
                               kvc_rope_style rope = KVC_ROPE_NONE, uint32_t rotary_dims = 0, bool keys_rotated = false) {
  ops::AttentionShape shape = test::attention_shape(q_heads, kv_heads, head_dim, 1, slots, dtype, rope, rotary_dims);
  shape.keys_rotated = keys_rotated;
  return shape;
}

}  // namespace

TEST_CASE("decode_append on Vulkan writes the token and attends as append_rows then attention") {
  // The token alone (no split), a token past one tile, and past many splits; GQA 1, 4, 6 and 16
  // (two query-head blocks a kv head); head_dim 40 takes the splits' shared-memory sums.
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t slots : {1u, 2u, 33u, 1001u}) {
      check_against_cpu(make_shape(4, 4, 64, slots, dtype));
      check_against_cpu(make_shape(8, 2, 128, slots, dtype, KVC_ROPE_NEOX, 0, true));
      check_against_cpu(make_shape(8, 2, 128, slots, dtype, KVC_ROPE_NEOX));
      check_against_cpu(make_shape(12, 2, 64, slots, dtype, KVC_ROPE_INTERLEAVED, 32, slots % 2 == 1));
    }
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_against_cpu(make_shape(6, 1, 40, 517, dtype, KVC_ROPE_NEOX, 24, true));
    check_against_cpu(make_shape(32, 2, 64, 300, dtype, KVC_ROPE_NEOX, 0, true));
    check_against_cpu(make_shape(8, 2, 128, 4099, dtype, KVC_ROPE_NEOX, 0, true));
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
