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
    // Each kv head's prefix has its own positions (as after a compaction, which keeps other
    // slots per head); the window's are the same for every head, after every prefix's.
    problem.positions.resize(size_t(shape.num_kv_heads) * shape.slot_stride);
    int32_t last = 0;
    for (uint32_t head = 0; head < shape.num_kv_heads; ++head) {
      int32_t position = 0;
      for (uint32_t slot = 0; slot < shape.num_prefix(); ++slot) {
        position += 1 + int32_t(rng()() % 3);
        problem.positions[size_t(head) * shape.slot_stride + slot] = position;
      }
      last = std::max(last, position);
    }
    for (uint32_t slot = shape.num_prefix(); slot < shape.slot_stride; ++slot) {
      last += 1 + int32_t(rng()() % 3);
      for (uint32_t head = 0; head < shape.num_kv_heads; ++head) problem.positions[size_t(head) * shape.slot_stride + slot] = last;
    }
    return problem;
  }

  // Calls visit(kv_head, logits, magnitudes) for every (query head, window query) row whose
  // query is not all zero (exact ties on every backend): the row's logits over the prefix slots
  // and, per slot, sum_d |q_d k_d|, in double, scaled by 1/sqrt(head_dim), with keys and queries
  // rotated as the reference rotates them.
  template <class Visit>
  void for_each_row(Visit visit) const {
    const uint32_t dim = shape.head_dim, prefix = shape.num_prefix(), group = shape.num_q_heads / shape.num_kv_heads;
    const std::vector<double> inv_freq = shape.rope.enabled() ? ops::rope_inverse_frequencies(shape.rope) : std::vector<double>();
    const double scale = 1.0 / std::sqrt(double(dim));
    std::vector<float> keys(size_t(prefix) * dim), query(dim);
    std::vector<double> logits(prefix), magnitudes(prefix);
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
            double dot = 0.0, magnitude = 0.0;
            for (uint32_t d = 0; d < dim; ++d) {
              const double term = double(query[d]) * keys[size_t(slot) * dim + d];
              dot += term;
              magnitude += std::fabs(term);
            }
            logits[slot] = dot * scale;
            magnitudes[slot] = magnitude * scale;
          }
          visit(kv_head, logits, magnitudes);
        }
    }
  }

  // The smallest gap, over every row, between the logits ranked hit_k and hit_k + 1 among the
  // prefix slots. Where it is below the f32 rounding of a logit, GPU and CPU may keep different
  // slots.
  double smallest_rank_gap() const {
    if (shape.hit_k == 0 || shape.hit_k >= shape.num_prefix()) return INFINITY;
    double smallest = INFINITY;
    for_each_row([&](uint32_t, std::vector<double>& logits, const std::vector<double>&) {
      std::nth_element(logits.begin(), logits.begin() + shape.hit_k, logits.end(), std::greater<double>());
      const double below = logits[shape.hit_k];
      const double above = *std::min_element(logits.begin(), logits.begin() + shape.hit_k);
      smallest = std::min(smallest, above - below);
    });
    return smallest;
  }

  // Per [kv][prefix] slot, the rows in which the slot's place in the top hit_k is uncertain when
  // every logit may be off by up to relative_error x its sum_d |q_d k_d| (the slot's interval
  // reaches across the row's rank-K boundary: a kept slot's lower end at or below the highest
  // upper end of the dropped ones, or the reverse). A backend within that error counts each
  // slot's hits within this many of the exact counts.
  std::vector<uint32_t> uncertain_hits(double relative_error) const {
    const uint32_t prefix = shape.num_prefix();
    std::vector<uint32_t> uncertain(size_t(shape.num_kv_heads) * prefix, 0);
    if (shape.hit_k == 0 || shape.hit_k >= prefix) return uncertain;
    std::vector<uint32_t> order(prefix);
    for_each_row([&](uint32_t kv_head, const std::vector<double>& logits, const std::vector<double>& magnitudes) {
      for (uint32_t slot = 0; slot < prefix; ++slot) order[slot] = slot;
      std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
      double kept_lowest = INFINITY, dropped_highest = -INFINITY;
      for (uint32_t rank = 0; rank < prefix; ++rank) {
        const uint32_t slot = order[rank];
        const double error = relative_error * magnitudes[slot];
        if (rank < shape.hit_k) kept_lowest = std::min(kept_lowest, logits[slot] - error);
        else dropped_highest = std::max(dropped_highest, logits[slot] + error);
      }
      for (uint32_t rank = 0; rank < prefix; ++rank) {
        const uint32_t slot = order[rank];
        const double error = relative_error * magnitudes[slot];
        const bool crosses = rank < shape.hit_k ? logits[slot] - error <= dropped_highest : logits[slot] + error >= kept_lowest;
        if (crosses) ++uncertain[size_t(kv_head) * prefix + slot];
      }
    });
    return uncertain;
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
