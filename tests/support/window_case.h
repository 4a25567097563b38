// One observation-window problem with random inputs, runnable on any backend: the window's
// queries, a cache of keys (positions shared by all kv heads, growing with gaps, as a cache
// that never evicted holds them) and poisoned outputs.
#pragma once

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
