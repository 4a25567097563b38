// The reference: keys rotated once per call (unless stored rotated), then a direct softmax per query row with double
// accumulation, so it is more accurate than any GPU path it checks.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attention.h"
#include "ops/softmax_cpu.h"

namespace kvc::ops {

void attention_cpu(const AttentionShape& shape, const AttentionArgs& args) {
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  const uint32_t dim = shape.head_dim;
  const uint32_t first_chunk_slot = shape.num_slots - shape.num_queries;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  const std::vector<double> inv_freq = shape.rope.enabled() ? rope_inverse_frequencies(shape.rope) : std::vector<double>();
  const int32_t* positions = shape.rope.enabled() ? args.positions.host<int32_t>() : nullptr;
  const void* q = args.q.host<void>();
  const void* k = args.k.host<void>();
  const void* v = args.v.host<void>();
  float* scores = args.scores ? args.scores.host<float>() : nullptr;
  if (scores) std::fill(scores, scores + size_t(shape.num_kv_heads) * shape.num_slots, 0.0f);
  float* logits_out = args.logits ? args.logits.host<float>() : nullptr;
  std::vector<double> logits(logits_out ? shape.num_slots : 0);

  std::vector<float> keys(size_t(shape.num_slots) * dim);
  std::vector<float> query(dim);
  std::vector<double> probs(shape.num_slots);
  std::vector<double> acc(dim);
  for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head) {
    const size_t slot_base = size_t(kv_head) * shape.slot_stride;
    for (uint32_t slot = 0; slot < shape.num_slots; ++slot) {
      float* key = &keys[size_t(slot) * dim];
      for (uint32_t d = 0; d < dim; ++d) key[d] = load_element(k, shape.dtype, (slot_base + slot) * dim + d);
      if (positions && !shape.keys_rotated) rope_rotate_row(shape.rope, inv_freq, key, positions[slot_base + slot]);
    }
    for (uint32_t g = 0; g < group; ++g) {
      const uint32_t head = kv_head * group + g;
      for (uint32_t i = 0; i < shape.num_queries; ++i) {
        const size_t q_base = (size_t(i) * shape.num_q_heads + head) * dim;
        for (uint32_t d = 0; d < dim; ++d) query[d] = load_element(q, shape.dtype, q_base + d);
        if (positions) rope_rotate_row(shape.rope, inv_freq, query.data(), positions[first_chunk_slot + i]);
        const uint32_t visible = first_chunk_slot + i + 1;
        softmax_over_keys(query.data(), keys.data(), visible, dim, scale, probs, logits_out ? &logits : nullptr);
        if (logits_out) {  // one query: visible == num_slots
          double max_logit = -HUGE_VAL, sum = 0.0;
          for (uint32_t slot = 0; slot < visible; ++slot) max_logit = std::max(max_logit, logits[slot]);
          for (uint32_t slot = 0; slot < visible; ++slot) {
            sum += std::exp(logits[slot] - max_logit);
            logits_out[(size_t(kv_head) * shape.num_slots + slot) * group + g] = static_cast<float>(logits[slot]);
          }
          args.lse.host<float>()[head] = static_cast<float>(max_logit + std::log(sum));
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (uint32_t slot = 0; slot < visible; ++slot) {
          const double p = probs[slot];
          for (uint32_t d = 0; d < dim; ++d) acc[d] += p * load_element(v, shape.dtype, (slot_base + slot) * dim + d);
          if (scores) scores[size_t(kv_head) * shape.num_slots + slot] += static_cast<float>(p);
        }
        for (uint32_t d = 0; d < dim; ++d) store_element(args.out.host<void>(), shape.dtype, q_base + d, static_cast<float>(acc[d]));
      }
    }
  }
}

void attention(Backend& backend, const AttentionShape& shape, const AttentionArgs& args) {
  require((!args.logits && !args.lse) || (args.logits && args.lse && shape.num_queries == 1), KVC_ERROR_INTERNAL,
          "attention's logits and lse come together, for one query");
  if (backend.is_cpu()) attention_cpu(shape, args);
  else attention_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
