// One observation-window problem with random inputs, runnable on any backend: the window's
// queries, a cache of keys (positions shared by all kv heads, growing with gaps, as a cache
// that never evicted holds them) and poisoned outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "ops/window_scores.h"
#include "support/selection_support.h"

namespace kvc::test {

struct WindowResult {
  std::vector<float> cumulative;  // [kv][prefix]
  std::vector<uint32_t> hits;     // [kv][prefix], empty without shape.hit_k
};

struct WindowCase {
  ops::WindowScoresShape shape;
  std::vector<float> q;            // [window][qh][d], rounded to the dtype
  std::vector<float> k;            // [kv][slot_stride][d], rounded to the dtype
  std::vector<int32_t> positions;  // [kv][slot_stride]

  static WindowCase random(ops::WindowScoresShape shape, float q_range = 2.0f) {
    WindowCase problem;
    problem.shape = shape;
    problem.q = random_floats(size_t(shape.window) * shape.num_q_heads * shape.head_dim, -q_range, q_range);
    problem.k = random_floats(size_t(shape.num_kv_heads) * shape.slot_stride * shape.head_dim);
    encode(problem.q, shape.dtype);
    encode(problem.k, shape.dtype);
    problem.positions.resize(size_t(shape.num_kv_heads) * shape.slot_stride);
    int32_t position = 0;
    for (uint32_t slot = 0; slot < shape.slot_stride; ++slot) {
      position += 1 + int32_t(rng()() % 3);
      for (uint32_t head = 0; head < shape.num_kv_heads; ++head) problem.positions[size_t(head) * shape.slot_stride + slot] = position;
    }
    return problem;
  }

  // The smallest gap, over every (query head, window query) row, between the logits ranked
  // hit_k and hit_k + 1 among the prefix slots (in double, keys and queries rotated as the
  // reference rotates them); rows whose query is all zero (exact ties on every backend) are
  // skipped. Where it is below the f32 rounding of a logit, GPU and CPU may keep different slots.
  double smallest_rank_gap() const {
    const uint32_t dim = shape.head_dim, prefix = shape.num_prefix(), group = shape.num_q_heads / shape.num_kv_heads;
    if (shape.hit_k == 0 || shape.hit_k >= prefix) return INFINITY;
    const std::vector<double> inv_freq = shape.rope.enabled() ? ops::rope_inverse_frequencies(shape.rope) : std::vector<double>();
    double smallest = INFINITY;
    std::vector<float> keys(size_t(prefix) * dim), query(dim);
    std::vector<double> logits(prefix);
    for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head) {
      const size_t base = size_t(kv_head) * shape.slot_stride;
      for (uint32_t slot = 0; slot < prefix; ++slot) {
        std::copy_n(k.begin() + (base + slot) * dim, dim, keys.begin() + size_t(slot) * dim);
        if (shape.rope.enabled()) ops::rope_rotate_row(shape.rope, inv_freq, &keys[size_t(slot) * dim], positions[base + slot]);
      }
      for (uint32_t g = 0; g < group; ++g)
        for (uint32_t j = 0; j < shape.window; ++j) {
          const size_t q_base = (size_t(j) * shape.num_q_heads + kv_head * group + g) * dim;
          std::copy_n(q.begin() + q_base, dim, query.begin());
          if (std::all_of(query.begin(), query.end(), [](float x) { return x == 0.0f; })) continue;
          if (shape.rope.enabled()) ops::rope_rotate_row(shape.rope, inv_freq, query.data(), positions[prefix + j]);
          for (uint32_t slot = 0; slot < prefix; ++slot) {
            double dot = 0.0;
            for (uint32_t d = 0; d < dim; ++d) dot += double(query[d]) * keys[size_t(slot) * dim + d];
            logits[slot] = dot;
          }
          std::nth_element(logits.begin(), logits.begin() + shape.hit_k, logits.end(), std::greater<double>());
          const double below = logits[shape.hit_k];
          const double above = *std::min_element(logits.begin(), logits.begin() + shape.hit_k);
          smallest = std::min(smallest, above - below);
        }
    }
    return smallest / std::sqrt(double(dim));  // the logits' 1/sqrt(head_dim) scale
  }

  WindowResult run(Backend& backend) const {
    std::vector<float> q_values = q, k_values = k;
    auto q_tensor = tensor_of(backend, encode(q_values, shape.dtype));
    auto k_tensor = tensor_of(backend, encode(k_values, shape.dtype));
    auto position_tensor = tensor_of(backend, positions);
    auto turns = tensor_of(backend, shape.rope.enabled() ? ops::rope_turn_table(shape.rope) : std::vector<uint32_t>{0, 0});
    const size_t count = size_t(shape.num_kv_heads) * shape.num_prefix();
    auto cumulative = make_poisoned(backend, count * 4), hits = make_poisoned(backend, count * 4);
    backend.begin();
    ops::window_scores(backend, shape,
                       {view(*q_tensor), view(*k_tensor), view(*position_tensor), view(*turns), view(*cumulative),
                        shape.hit_k ? view(*hits) : View{}});
    backend.submit();
    return {read_as<float>(backend, *cumulative, count), shape.hit_k ? read_as<uint32_t>(backend, *hits, count) : std::vector<uint32_t>()};
  }
};

}  // namespace kvc::test
