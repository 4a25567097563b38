#include "support/eviction_stream.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/decode_evict.h"
#include "support/test_support.h"

namespace kvc::test {
namespace {

constexpr uint32_t kMaxChunk = 8;  // tokens one record_tokens may append to a full cache

// Token index t as two f16-exact integers (t % 1024, t / 1024); V holds their negatives.
constexpr uint32_t kIndexBase = 1024;

// Element d >= 2 of token `token`'s key row in kv head `head` (its value is the negation): a
// pattern that differs between tokens, so a row moved in part is seen unless the victim and the
// token moved into its slot are a multiple of 13 apart (STREAMING's 96 at capacity 101 is not;
// a period of 16, which divides 96, hid a half-copied row). Exact in f16.
float key_tail(uint32_t head, uint32_t token, uint32_t d) { return float(head) + float((token + d) % 13) / 16.0f; }

}  // namespace

ops::EvictionShape eviction_stream_shape(ops::EvictionRule rule, uint32_t capacity, uint32_t sinks, uint32_t window,
                                         uint32_t num_kv_heads, uint32_t head_dim, Dtype dtype) {
  ops::EvictionShape shape;
  shape.rule = rule;
  shape.num_kv_heads = num_kv_heads;
  shape.head_dim = head_dim;
  shape.slot_stride = capacity + kMaxChunk + 1;  // room for a chunk, and a stride past it
  shape.dtype = dtype;
  shape.sinks = sinks;
  shape.recent_window = rule == ops::EvictionRule::Oldest ? capacity - sinks : window;
  shape.tree_span = capacity - sinks - shape.recent_window;
  return shape;
}

EvictionStream::EvictionStream(Backend& backend_in, const ops::EvictionShape& settings, uint32_t capacity_in)
    : backend(backend_in), shape(settings), capacity(capacity_in) {
  shape.slots_held = 0;
  const size_t slots = size_t(shape.num_kv_heads) * shape.slot_stride;
  k = make_poisoned(backend, slots * shape.head_dim * dtype_size(shape.dtype));
  v = make_poisoned(backend, k->bytes());
  positions = make_poisoned(backend, slots * 4);
  sums = make_poisoned(backend, slots * 4);
  counts = make_poisoned(backend, slots * 4);
  if (ops::rule_keeps_sums(shape.rule) && shape.num_q_heads > 0) {
    logits = make_poisoned(backend, size_t(shape.num_q_heads) * shape.slot_stride * 4);
    lse = make_poisoned(backend, size_t(shape.num_q_heads) * 4);
    // The deferred route's candidates, for the most slots a step holds.
    candidates = make_poisoned(backend, ops::deferred_candidates_bytes(shape.rule, shape.num_kv_heads, shape.slot_stride));
  }
}

void EvictionStream::record_tokens(View scores, uint32_t count) { record_step(count, scores, View{}, View{}); }

void EvictionStream::record_token_logits(View logits, View lse) { record_step(1, View{}, logits, lse); }

void EvictionStream::append_tokens(uint32_t count) {
  REQUIRE(shape.slots_held + count <= shape.slot_stride);
  const size_t row_bytes = size_t(shape.head_dim) * dtype_size(shape.dtype);
  for (uint32_t i = 0; i < count; ++i, ++tokens) {
    const uint32_t slot = shape.slots_held + i;
    for (uint32_t head = 0; head < shape.num_kv_heads; ++head) {
      std::vector<float> key(shape.head_dim, float(head)), value(shape.head_dim, -float(head));
      key[0] = float(tokens % kIndexBase), key[1] = float(tokens / kIndexBase);
      for (uint32_t d = 2; d < shape.head_dim; ++d) key[d] = key_tail(head, uint32_t(tokens), d);
      for (uint32_t d = 0; d < shape.head_dim; ++d) value[d] = -key[d];
      const size_t row = size_t(head) * shape.slot_stride + slot;
      backend.upload(encode(key, shape.dtype).data(), row_bytes, *k, row * row_bytes);
      backend.upload(encode(value, shape.dtype).data(), row_bytes, *v, row * row_bytes);
      const int32_t rank = int32_t(slot);
      backend.upload(&rank, 4, *positions, row * 4);
    }
  }
}

ops::EvictionShape EvictionStream::next_step(uint32_t count) {
  ops::EvictionShape step = shape;
  step.slots_held = shape.slots_held + count;
  step.new_slots = count;
  step.num_queries = count;
  step.evictions = step.slots_held > capacity ? step.slots_held - capacity : 0;
  shape.slots_held = step.slots_held - step.evictions;
  if (step.evictions) shape.tree_first = (shape.tree_first + step.evictions) % std::max(1u, shape.tree_span);
  return step;
}

void EvictionStream::record_step(uint32_t count, View scores, View logits_in, View lse_in) {
  append_tokens(count);
  const ops::EvictionShape step = next_step(count);
  ops::eviction_step(backend, step, {view(*k), view(*v), view(*positions), scores, logits_in, lse_in, view(*sums), view(*counts)});
}

std::optional<ops::DeferredEviction> EvictionStream::record_token_decode(View q, View out, DecodeRoute route) {
  append_tokens(1);
  const ops::EvictionShape step = next_step(1);
  const ops::AttentionShape attention{shape.num_q_heads, shape.num_kv_heads, shape.head_dim, 1, step.slots_held,
                                      shape.slot_stride, shape.dtype};
  View step_logits, step_lse;
  if (ops::rule_keeps_sums(shape.rule)) {
    REQUIRE(logits != nullptr);  // settings.num_q_heads was set
    step_logits = view(*logits), step_lse = view(*lse);
  }
  const ops::AttentionArgs attend{q, view(*k), view(*v), view(*positions), View{}, out, View{}, step_logits, step_lse};
  const ops::EvictionArgs evict{view(*k), view(*v), view(*positions), View{}, step_logits, step_lse, view(*sums), view(*counts)};
  switch (route) {
    case DecodeRoute::TwoOps:
      ops::attention(backend, attention, attend);
      ops::eviction_step(backend, step, evict);
      return std::nullopt;
    case DecodeRoute::Fused:
      ops::decode_evict(backend, attention, step, {attend, evict});
      return std::nullopt;
    case DecodeRoute::Deferred: {
      REQUIRE(ops::can_defer_eviction(backend, step, evict));
      return ops::decode_evict_deferring(backend, attention, step, {attend, evict}, view(*candidates));
    }
  }
  return std::nullopt;
}

std::vector<std::vector<uint32_t>> EvictionStream::kept_tokens() {
  const std::vector<float> keys = decode(read_tensor(backend, *k, k->bytes()), shape.dtype);
  const std::vector<float> values = decode(read_tensor(backend, *v, v->bytes()), shape.dtype);
  std::vector<int32_t> ranks(positions->bytes() / 4);
  const std::vector<unsigned char> rank_bytes = read_tensor(backend, *positions, positions->bytes());
  std::memcpy(ranks.data(), rank_bytes.data(), rank_bytes.size());
  std::vector<std::vector<uint32_t>> kept(shape.num_kv_heads, std::vector<uint32_t>(shape.slots_held, ~0u));
  for (uint32_t head = 0; head < shape.num_kv_heads; ++head)
    for (uint32_t slot = 0; slot < shape.slots_held; ++slot) {
      const size_t row = size_t(head) * shape.slot_stride + slot, first = row * shape.head_dim;
      const int32_t rank = ranks[row];
      REQUIRE(rank >= 0);
      REQUIRE(uint32_t(rank) < shape.slots_held);
      CHECK(values[first] == -keys[first]);
      CHECK(values[first + 1] == -keys[first + 1]);
      const uint32_t token = uint32_t(keys[first]) + kIndexBase * uint32_t(keys[first + 1]);
      for (uint32_t d = 2; d < shape.head_dim; ++d) {
        if (keys[first + d] != key_tail(head, token, d) || values[first + d] != -keys[first + d])
          FAIL_CHECK("kv head " << head << " slot " << slot << ": element " << d << " of token " << token << "'s row");
      }
      kept[head][rank] = token;
    }
  return kept;
}

std::vector<unsigned char> EvictionStream::state_bytes() {
  std::vector<unsigned char> bytes;
  for (const Tensor* tensor : {positions.get(), sums.get(), counts.get()})
    for (uint32_t head = 0; head < shape.num_kv_heads; ++head) {
      const std::vector<unsigned char> all = read_tensor(backend, *tensor, tensor->bytes());
      const size_t from = size_t(head) * shape.slot_stride * 4;
      bytes.insert(bytes.end(), all.begin() + from, all.begin() + from + size_t(shape.slots_held) * 4);
    }
  return bytes;
}

EvictionByFormula::EvictionByFormula(const ops::EvictionShape& settings, uint32_t capacity_in)
    : shape(settings), capacity(capacity_in), kept(settings.num_kv_heads), sums(settings.num_kv_heads),
      counts(settings.num_kv_heads) {}

void EvictionByFormula::add_token(const std::vector<std::vector<double>>& scores_by_rank) {
  const uint32_t heads = shape.num_kv_heads;
  for (uint32_t h = 0; h < heads; ++h) {
    kept[h].push_back(tokens);
    sums[h].push_back(0.0);   // Algorithm 1 line 8: S = (S ∪ {0}) + a
    counts[h].push_back(0.0); // line 7: C = (C ∪ {0}) + 1
  }
  ++tokens;
  const size_t length = kept[0].size();
  for (uint32_t h = 0; h < heads; ++h)
    for (size_t rank = 0; rank < length; ++rank) {
      if (shape.rule == ops::EvictionRule::CurrentQuery) {  // TOVA: this query's attention, all heads
        sums[h][rank] = 0.0;
        for (uint32_t g = 0; g < heads; ++g) sums[h][rank] += scores_by_rank[g][rank];
      } else {
        sums[h][rank] += scores_by_rank[h][rank];
      }
      counts[h][rank] += 1.0;
    }
  if (length <= capacity) return;
  const size_t first = shape.sinks, end = length - shape.recent_window;  // evictable ranks
  const size_t span = capacity - shape.sinks - shape.recent_window;
  for (uint32_t h = 0; h < heads; ++h) {
    size_t victim = first;
    switch (shape.rule) {
      case ops::EvictionRule::Oldest:
        break;
      case ops::EvictionRule::Accumulated:
      case ops::EvictionRule::CurrentQuery: {
        std::vector<double> candidates(sums[h].begin() + first, sums[h].begin() + end);
        victim = first + (std::min_element(candidates.begin(), candidates.end()) - candidates.begin());
        std::sort(candidates.begin(), candidates.end());
        if (candidates.size() > 1) min_margin = std::min(min_margin, (candidates[1] - candidates[0]) / candidates[1]);
        break;
      }
      case ops::EvictionRule::Tree:
      case ops::EvictionRule::TreeLeft: {
        const size_t left = first + idx - 1;  // scope {idx, idx + 1} of the evictable region
        const double importance_left = sums[h][left] / counts[h][left], importance_right = sums[h][left + 1] / counts[h][left + 1];
        // Lines 11-14: evict idx + 1 when S̄_idx > S̄_idx+1, else idx.
        victim = shape.rule == ops::EvictionRule::Tree && importance_left > importance_right ? left + 1 : left;
        if (shape.rule == ops::EvictionRule::Tree)
          min_margin = std::min(min_margin, std::fabs(importance_left - importance_right) / std::max(importance_left, importance_right));
        break;
      }
    }
    kept[h].erase(kept[h].begin() + victim);
    sums[h].erase(sums[h].begin() + victim);
    counts[h].erase(counts[h].begin() + victim);
  }
  if (span > 0) idx = idx % span + 1;  // line 16 as DESIGN.md reads it: idx visits 1..span in turn
}

}  // namespace kvc::test
