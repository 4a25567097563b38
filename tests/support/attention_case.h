// One attention problem with random inputs, runnable on any backend: the same inputs go to
// the CPU reference, the Vulkan op and the formula.
#pragma once

#include <memory>
#include <vector>

#include "ops/attention.h"

namespace kvc::test {

struct AttentionResult {
  std::vector<float> out;     // [n][qh][d]
  std::vector<float> scores;  // [kv][slots]
  std::vector<float> logits;  // [kv][slots][group], one query with scores only
  std::vector<float> lse;     // [qh], with logits
};

// A case's operands on a backend, as ops take them.
struct AttentionTensors {
  std::unique_ptr<Tensor> q, k, v, positions, turns, out;
  ops::AttentionArgs args() const {
    return {view(*q), view(*k), view(*v), view(*positions), view(*turns), view(*out)};
  }
};

// An attention shape of `queries` over `slots` (rotary_dims 0: all of head_dim rotate); the
// rest (slot_stride, keys_rotated) as AttentionShape defaults them.
inline ops::AttentionShape attention_shape(uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim, uint32_t queries, uint32_t slots,
                                           Dtype dtype, kvc_rope_style rope = KVC_ROPE_NONE, uint32_t rotary_dims = 0) {
  ops::AttentionShape shape;
  shape.num_q_heads = q_heads;
  shape.num_kv_heads = kv_heads;
  shape.head_dim = head_dim;
  shape.num_queries = queries;
  shape.num_slots = slots;
  shape.dtype = dtype;
  shape.rope = {rope, rope == KVC_ROPE_NONE ? 0u : (rotary_dims ? rotary_dims : head_dim), 10000.0};
  return shape;
}

struct AttentionCase {
  ops::AttentionShape shape;
  std::vector<float> q;               // [n][qh][d], rounded to the dtype
  std::vector<float> k, v;            // [kv][num_slots][d], rounded to the dtype
  std::vector<int32_t> positions;     // [kv][num_slots]

  // Random inputs: q in [-q_range, q_range] (larger gives peakier softmax), k in [-1, 1],
  // v in [0, 1] (outputs of order 0.5, so relative errors are meaningful); positions grow
  // with gaps, differently per kv head. slot_stride is num_slots + 3 to exercise strides.
  static AttentionCase random(const ops::AttentionShape& shape, float q_range = 2.0f);

  // The inputs on `backend`: K and V strided, their slack slots NaN (never to be read), and the
  // output poisoned.
  AttentionTensors upload(Backend& backend) const;

  // Runs ops::attention on `backend` with poisoned outputs; scores when asked, and for one
  // query the logits and lse as well.
  AttentionResult run(Backend& backend, bool with_scores) const;
};

}  // namespace kvc::test
