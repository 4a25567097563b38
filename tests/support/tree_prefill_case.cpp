#include "support/tree_prefill_case.h"

#include <algorithm>
#include <cstring>

#include "support/test_support.h"

namespace kvc::test {

TreePrefillCase TreePrefillCase::random(Dtype dtype) {
  TreePrefillCase c;
  auto pick = [](uint32_t low, uint32_t high) { return std::uniform_int_distribution<uint32_t>(low, high)(rng()); };
  ops::TreePrefillShape& s = c.shape;
  s.num_kv_heads = pick(1, 3);
  s.head_dim = 8 * pick(1, 5);
  s.dtype = dtype;
  s.sinks = pick(0, 5);
  s.recent_window = pick(0, 40);
  s.block = pick(1, 9);
  s.capacity = s.sinks + s.recent_window + pick(1, 120);
  s.slots_held = s.capacity + pick(1, 700);
  s.slot_stride = s.slots_held + pick(0, 5);
  s.num_queries = pick(1, std::min(s.block, s.slots_held));
  const size_t rows = size_t(s.num_kv_heads) * s.slot_stride;
  c.k = random_floats(rows * s.head_dim);
  c.v = random_floats(rows * s.head_dim);
  c.positions.assign(rows, -7);
  for (uint32_t h = 0; h < s.num_kv_heads; ++h) {
    std::vector<int32_t> ranks(s.slots_held);
    for (uint32_t r = 0; r < s.slots_held; ++r) ranks[r] = int32_t(r);
    std::shuffle(ranks.begin(), ranks.end(), rng());
    for (uint32_t slot = 0; slot < s.slots_held; ++slot) {
      c.positions[size_t(h) * s.slot_stride + slot] = ranks[slot];
      // f16-exact up to 2048: held stays below it.
      c.k[(size_t(h) * s.slot_stride + slot) * s.head_dim] = float(ranks[slot]);
    }
  }
  encode(c.k, dtype);
  encode(c.v, dtype);
  c.scores = random_floats(size_t(s.num_kv_heads) * s.slots_held, 0.001f, 1.0f);
  return c;
}

TreePrefillResult TreePrefillCase::run(Backend& backend) const {
  const size_t rows = size_t(shape.num_kv_heads) * shape.slot_stride, row_bytes = shape.head_dim * dtype_size(shape.dtype);
  std::vector<float> k_copy = k, v_copy = v;
  const auto k_bytes = encode(k_copy, shape.dtype), v_bytes = encode(v_copy, shape.dtype);
  auto k_in = make_tensor(backend, k_bytes.data(), k_bytes.size()), v_in = make_tensor(backend, v_bytes.data(), v_bytes.size());
  auto pos = make_tensor(backend, positions.data(), rows * 4);
  auto score = make_tensor(backend, scores.data(), scores.size() * 4);
  auto k_out = make_poisoned(backend, k_bytes.size()), v_out = make_poisoned(backend, v_bytes.size());
  auto sums = make_poisoned(backend, rows * 4), counts = make_poisoned(backend, rows * 4), scratch = make_poisoned(backend, 3 * rows * 4);
  backend.begin();
  ops::tree_prefill(backend, shape,
                    {view(*k_in), view(*v_in), view(*pos), view(*score), view(*k_out), view(*v_out), view(*sums), view(*counts),
                     view(*scratch)});
  backend.submit();
  const uint32_t kept = ops::tree_block_layout(shape).kept;
  const auto k_all = read_tensor(backend, *k_out, k_bytes.size()), v_all = read_tensor(backend, *v_out, v_bytes.size());
  const auto pos_all = read_tensor(backend, *pos, rows * 4), sums_all = read_tensor(backend, *sums, rows * 4),
             counts_all = read_tensor(backend, *counts, rows * 4);
  TreePrefillResult result;
  for (uint32_t h = 0; h < shape.num_kv_heads; ++h) {
    const size_t first = size_t(h) * shape.slot_stride;
    result.k.insert(result.k.end(), k_all.begin() + first * row_bytes, k_all.begin() + (first + kept) * row_bytes);
    result.v.insert(result.v.end(), v_all.begin() + first * row_bytes, v_all.begin() + (first + kept) * row_bytes);
    for (uint32_t r = 0; r < kept; ++r) {
      int32_t position;
      float sum;
      uint32_t count;
      std::memcpy(&position, &pos_all[(first + r) * 4], 4);
      std::memcpy(&sum, &sums_all[(first + r) * 4], 4);
      std::memcpy(&count, &counts_all[(first + r) * 4], 4);
      result.positions.push_back(position);
      result.sums.push_back(sum);
      result.counts.push_back(count);
    }
  }
  return result;
}

}  // namespace kvc::test
