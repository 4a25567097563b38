// The reference: the step run kv head by kv head with plain loops, in the same f32 operations
// (and order) as the shader, so both choose the same victims bit for bit (from logits, up to
// exp's rounding, which the shader's exp need not share).
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/eviction_step.h"

namespace kvc::ops {
namespace {

// One kv head's slots: ranks, scores and rows, addressed by physical slot.
struct HeadSlots {
  int32_t* positions;
  float* sums;
  uint32_t* counts;
  unsigned char* k;
  unsigned char* v;
  size_t row_bytes;

  uint32_t slot_of_rank(uint32_t held, uint32_t rank) const {
    for (uint32_t slot = 0; slot < held; ++slot)
      if (uint32_t(positions[slot]) == rank) return slot;
    return held;  // unreachable: ranks 0..held-1 are all present
  }
};

uint32_t choose_victim(const EvictionShape& shape, const HeadSlots& head, uint32_t held, uint32_t eviction) {
  const uint32_t first = shape.sinks, end = held - shape.recent_window;  // evictable ranks [first, end)
  switch (shape.rule) {
    case EvictionRule::Oldest:
      return first;
    case EvictionRule::Accumulated:
    case EvictionRule::CurrentQuery: {
      // Lowest score; ties go to the lowest rank so CPU and GPU agree.
      uint32_t best_rank = end;
      float best = 0.0f;
      for (uint32_t slot = 0; slot < held; ++slot) {
        const uint32_t rank = uint32_t(head.positions[slot]);
        if (rank < first || rank >= end) continue;
        const float score = head.sums[slot];
        if (best_rank == end || score < best || (score == best && rank < best_rank)) best = score, best_rank = rank;
      }
      return best_rank;
    }
    case EvictionRule::Tree:
    case EvictionRule::TreeLeft: {
      const uint32_t left = first + (shape.tree_first + eviction) % shape.tree_span;
      if (shape.rule == EvictionRule::TreeLeft) return left;
      const uint32_t a = head.slot_of_rank(held, left), b = head.slot_of_rank(held, left + 1);
      // S_a / C_a > S_b / C_b without a division (C > 0): products are exact-rounded everywhere.
      return head.sums[a] * float(head.counts[b]) > head.sums[b] * float(head.counts[a]) ? left + 1 : left;
    }
  }
  return first;
}

void evict_rank(const HeadSlots& head, uint32_t held, uint32_t victim, bool move_sums, bool move_counts) {
  const uint32_t freed = head.slot_of_rank(held, victim), last = held - 1;
  for (uint32_t slot = 0; slot < held; ++slot)
    if (uint32_t(head.positions[slot]) > victim) --head.positions[slot];
  if (freed == last) return;
  head.positions[freed] = head.positions[last];
  std::memcpy(head.k + freed * head.row_bytes, head.k + last * head.row_bytes, head.row_bytes);
  std::memcpy(head.v + freed * head.row_bytes, head.v + last * head.row_bytes, head.row_bytes);
  if (move_sums) head.sums[freed] = head.sums[last];
  if (move_counts) head.counts[freed] = head.counts[last];
}

// Per kv head and slot, the step's score: the probabilities given, or formed from the logits.
std::vector<float> step_scores(const EvictionShape& shape, const EvictionArgs& args) {
  const size_t slots = size_t(shape.num_kv_heads) * shape.slots_held;
  if (!args.logits) return std::vector<float>(args.scores.host<float>(), args.scores.host<float>() + slots);
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  const float* logits = args.logits.host<float>();
  const float* lse = args.lse.host<float>();
  std::vector<float> scores(slots, 0.0f);
  for (uint32_t head = 0; head < shape.num_q_heads; ++head)
    for (uint32_t slot = 0; slot < shape.slots_held; ++slot)
      scores[size_t(head / group) * shape.slots_held + slot] +=
          std::exp(logits[(size_t(head / group) * shape.slots_held + slot) * group + head % group] - lse[head]);
  return scores;
}

}  // namespace

void eviction_step_cpu(const EvictionShape& shape, const EvictionArgs& args) {
  const uint32_t held = shape.slots_held;
  const bool sums = rule_keeps_sums(shape.rule), counts = rule_keeps_counts(shape.rule);
  const size_t row_bytes = size_t(shape.head_dim) * dtype_size(shape.dtype);
  const std::vector<float> step = sums ? step_scores(shape, args) : std::vector<float>();
  const float* scores = step.data();
  for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head) {
    const size_t base = size_t(kv_head) * shape.slot_stride;
    const HeadSlots head{args.positions.host<int32_t>() + base,
                         sums ? args.score_sums.host<float>() + base : nullptr,
                         counts ? args.score_counts.host<uint32_t>() + base : nullptr,
                         args.k.host<unsigned char>() + base * row_bytes,
                         args.v.host<unsigned char>() + base * row_bytes,
                         row_bytes};
    for (uint32_t slot = 0; sums && slot < held; ++slot) {
      const uint32_t rank = uint32_t(head.positions[slot]);
      if (slot + shape.new_slots >= held) {
        head.sums[slot] = 0.0f;
        if (counts) head.counts[slot] = 0;
      }
      if (shape.rule == EvictionRule::CurrentQuery) {
        float total = 0.0f;
        for (uint32_t h = 0; h < shape.num_kv_heads; ++h) total += scores[size_t(h) * held + slot];
        head.sums[slot] = total;
      } else {
        head.sums[slot] += scores[size_t(kv_head) * held + slot];
      }
      // Queries are the newest num_queries ranks; each sees the ranks up to its own.
      const uint32_t first_query = held - shape.num_queries;
      if (counts) head.counts[slot] += held - (rank > first_query ? rank : first_query);
    }
    for (uint32_t eviction = 0; eviction < shape.evictions; ++eviction) {
      const uint32_t held_now = held - eviction;
      evict_rank(head, held_now, choose_victim(shape, head, held_now, eviction), sums, counts);
    }
  }
}

void eviction_step(Backend& backend, const EvictionShape& shape, const EvictionArgs& args) {
  if (backend.is_cpu()) eviction_step_cpu(shape, args);
  else eviction_step_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
