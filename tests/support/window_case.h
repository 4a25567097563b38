// One observation-window problem with random inputs, runnable on any backend: the window's
// queries, a cache of keys (positions shared by all kv heads, growing with gaps, as a cache
// that never evicted holds them) and poisoned outputs.
#pragma once

#include <vector>

#include "ops/window_scores.h"
#include "support/selection_support.h"

namespace kvc::test {

struct WindowResult {
  std::vector<float> probs;       // [qh][window][prefix], empty when not asked for
  std::vector<float> cumulative;  // [kv][prefix]
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

  // with_probs false asks for the sums alone (pooled attention's use).
  WindowResult run(Backend& backend, bool with_probs = true) const {
    std::vector<float> q_values = q, k_values = k;
    auto q_tensor = tensor_of(backend, encode(q_values, shape.dtype));
    auto k_tensor = tensor_of(backend, encode(k_values, shape.dtype));
    auto position_tensor = tensor_of(backend, positions);
    auto turns = tensor_of(backend, shape.rope.enabled() ? ops::rope_turn_table(shape.rope) : std::vector<uint32_t>{0, 0});
    const size_t prob_count = size_t(shape.num_q_heads) * shape.window * shape.num_prefix();
    const size_t sum_count = size_t(shape.num_kv_heads) * shape.num_prefix();
    auto probs = make_poisoned(backend, prob_count * 4), cumulative = make_poisoned(backend, sum_count * 4);
    backend.begin();
    ops::window_scores(backend, shape,
                       {view(*q_tensor), view(*k_tensor), view(*position_tensor), view(*turns), with_probs ? view(*probs) : View{},
                        view(*cumulative)});
    backend.submit();
    return {with_probs ? read_as<float>(backend, *probs, prob_count) : std::vector<float>(), read_as<float>(backend, *cumulative, sum_count)};
  }
};

}  // namespace kvc::test
