#include "support/attention_case.h"

#include <algorithm>
#include <cmath>

#include "support/test_support.h"

namespace kvc::test {

AttentionCase AttentionCase::random(const ops::AttentionShape& base_shape, float q_range) {
  AttentionCase c;
  c.shape = base_shape;
  c.shape.slot_stride = base_shape.num_slots + 3;
  const size_t dim = c.shape.head_dim;
  c.q = random_floats(size_t(c.shape.num_queries) * c.shape.num_q_heads * dim, -q_range, q_range);
  c.k = random_floats(size_t(c.shape.num_kv_heads) * c.shape.num_slots * dim);
  c.v = random_floats(c.k.size(), 0.0f, 1.0f);
  encode(c.q, c.shape.dtype);
  encode(c.k, c.shape.dtype);
  encode(c.v, c.shape.dtype);
  c.positions.resize(size_t(c.shape.num_kv_heads) * c.shape.num_slots);
  std::uniform_int_distribution<int32_t> gap(1, 3);
  for (uint32_t kv = 0; kv < c.shape.num_kv_heads; ++kv) {
    int32_t position = static_cast<int32_t>(kv * 5);
    for (uint32_t slot = 0; slot < c.shape.num_slots; ++slot) {
      c.positions[size_t(kv) * c.shape.num_slots + slot] = position;
      position += gap(rng());
    }
  }
  return c;
}

AttentionTensors AttentionCase::upload(Backend& backend) const {
  const size_t dim = shape.head_dim;
  const size_t slots = shape.num_slots, stride = shape.slot_stride;
  std::vector<float> q_copy = q;
  const std::vector<unsigned char> q_bytes = encode(q_copy, shape.dtype);
  std::vector<float> k_strided(shape.num_kv_heads * stride * dim, NAN), v_strided(k_strided.size(), NAN);
  std::vector<int32_t> positions_strided(shape.num_kv_heads * stride, -1);
  for (size_t kv = 0; kv < shape.num_kv_heads; ++kv) {
    std::copy_n(&k[kv * slots * dim], slots * dim, &k_strided[kv * stride * dim]);
    std::copy_n(&v[kv * slots * dim], slots * dim, &v_strided[kv * stride * dim]);
    std::copy_n(&positions[kv * slots], slots, &positions_strided[kv * stride]);
  }
  const std::vector<unsigned char> k_bytes = encode(k_strided, shape.dtype), v_bytes = encode(v_strided, shape.dtype);
  const std::vector<uint32_t> turns = shape.rope.enabled() ? ops::rope_turn_table(shape.rope) : std::vector<uint32_t>{0, 0};
  AttentionTensors tensors;
  tensors.q = make_tensor(backend, q_bytes.data(), q_bytes.size());
  tensors.k = make_tensor(backend, k_bytes.data(), k_bytes.size());
  tensors.v = make_tensor(backend, v_bytes.data(), v_bytes.size());
  tensors.positions = make_tensor(backend, positions_strided.data(), positions_strided.size() * 4);
  tensors.turns = make_tensor(backend, turns.data(), turns.size() * 4);
  tensors.out = make_poisoned(backend, q_bytes.size());
  return tensors;
}

AttentionResult AttentionCase::run(Backend& backend, bool with_scores) const {
  const size_t slots = shape.num_slots;
  const AttentionTensors tensors = upload(backend);
  const size_t out_bytes = tensors.out->bytes(), score_bytes = shape.num_kv_heads * slots * 4;
  auto scores_tensor = make_poisoned(backend, score_bytes);
  const bool with_logits = with_scores && shape.num_queries == 1;
  const size_t logit_bytes = size_t(shape.num_q_heads) * slots * 4, lse_bytes = size_t(shape.num_q_heads) * 4;
  auto logits_tensor = make_poisoned(backend, logit_bytes), lse_tensor = make_poisoned(backend, lse_bytes);

  backend.begin();
  ops::AttentionArgs args = tensors.args();
  if (with_scores) args.scores = view(*scores_tensor);
  if (with_logits) {
    args.logits = view(*logits_tensor);
    args.lse = view(*lse_tensor);
  }
  ops::attention(backend, shape, args);
  backend.submit();
  AttentionResult result;
  result.out = decode(read_tensor(backend, *tensors.out, out_bytes), shape.dtype);
  if (with_scores) result.scores = decode(read_tensor(backend, *scores_tensor, score_bytes), Dtype::F32);
  if (with_logits) {
    result.logits = decode(read_tensor(backend, *logits_tensor, logit_bytes), Dtype::F32);
    result.lse = decode(read_tensor(backend, *lse_tensor, lse_bytes), Dtype::F32);
  }
  return result;
}

}  // namespace kvc::test
