// The reference: keys rotated once, then a direct softmax per (query head, window query) in
// double; the sums accumulate in double too; each row's top hit_k by a partial sort of
// (logit, position).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/softmax_cpu.h"
#include "ops/window_scores.h"

namespace kvc::ops {

void window_scores_cpu(const WindowScoresShape& shape, const WindowScoresArgs& args) {
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  const uint32_t dim = shape.head_dim;
  const uint32_t prefix = shape.num_prefix();
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  const std::vector<double> inv_freq = shape.rope.enabled() ? rope_inverse_frequencies(shape.rope) : std::vector<double>();
  const int32_t* positions = shape.rope.enabled() ? args.positions.host<int32_t>() : nullptr;
  float* cumulative = args.cumulative.host<float>();
  uint32_t* hits = shape.hit_k ? args.hits.host<uint32_t>() : nullptr;

  std::vector<float> keys(size_t(shape.num_slots) * dim), query(dim);
  std::vector<double> row_probs(shape.num_slots), row_logits(shape.num_slots), sums(prefix);
  std::vector<uint32_t> ranked(prefix);
  auto ranks_before = [&](uint32_t a, uint32_t b) { return row_logits[a] != row_logits[b] ? row_logits[a] > row_logits[b] : a < b; };
  for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head) {
    const size_t slot_base = size_t(kv_head) * shape.slot_stride;
    for (uint32_t slot = 0; slot < shape.num_slots; ++slot) {
      float* key = &keys[size_t(slot) * dim];
      for (uint32_t d = 0; d < dim; ++d) key[d] = load_element(args.k.host<void>(), shape.dtype, (slot_base + slot) * dim + d);
      if (positions) rope_rotate_row(shape.rope, inv_freq, key, positions[slot_base + slot]);
    }
    std::fill(sums.begin(), sums.end(), 0.0);
    if (hits) std::fill(hits + size_t(kv_head) * prefix, hits + size_t(kv_head + 1) * prefix, 0u);
    for (uint32_t g = 0; g < group; ++g) {
      const uint32_t head = kv_head * group + g;
      for (uint32_t j = 0; j < shape.window; ++j) {
        const size_t q_base = (size_t(j) * shape.num_q_heads + head) * dim;
        for (uint32_t d = 0; d < dim; ++d) query[d] = load_element(args.q.host<void>(), shape.dtype, q_base + d);
        if (positions) rope_rotate_row(shape.rope, inv_freq, query.data(), positions[prefix + j]);
        softmax_over_keys(query.data(), keys.data(), prefix + j + 1, dim, scale, row_probs, &row_logits);
        for (uint32_t slot = 0; slot < prefix; ++slot) sums[slot] += row_probs[slot];
        if (!hits) continue;
        for (uint32_t slot = 0; slot < prefix; ++slot) ranked[slot] = slot;
        std::partial_sort(ranked.begin(), ranked.begin() + shape.hit_k, ranked.end(), ranks_before);
        for (uint32_t i = 0; i < shape.hit_k; ++i) ++hits[size_t(kv_head) * prefix + ranked[i]];
      }
    }
    for (uint32_t slot = 0; slot < prefix; ++slot) cumulative[size_t(kv_head) * prefix + slot] = static_cast<float>(sums[slot]);
  }
}

void window_scores(Backend& backend, const WindowScoresShape& shape, const WindowScoresArgs& args) {
  require(shape.num_slots > shape.window && shape.window >= 1, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "window_scores: " + std::to_string(shape.num_slots) + " slots leave no prefix before a window of " +
         std::to_string(shape.window);
  });
  require(shape.hit_k == 0 || args.hits.tensor != nullptr, KVC_ERROR_INVALID_ARGUMENT, "window_scores: hit_k is set but no hits output is given");
  require(shape.hit_k <= shape.num_prefix(), KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "window_scores: hit_k = " + std::to_string(shape.hit_k) + " exceeds the prefix of " +
         std::to_string(shape.num_prefix()) + " slots";
  });
  if (backend.is_cpu()) window_scores_cpu(shape, args);
  else window_scores_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
