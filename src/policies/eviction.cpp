// The eviction policies' step (see eviction.h): TreeKV §4.1 for decoding, §4.2 for prefill.
#include "policies/eviction.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cache/cache.h"
#include "ops/attention.h"
#include "ops/decode_evict.h"
#include "ops/tree_prefill.h"

namespace kvc {

EvictionPolicy::EvictionPolicy(const CacheConfig& config)
    : settings_(validate_eviction_params(config)), layers_(config.num_layers) {}

uint32_t EvictionPolicy::slots_allocated() const {
  return *std::max_element(settings_.capacities.begin(), settings_.capacities.end()) + settings_.chunk_slots;
}

void EvictionPolicy::check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const {
  const uint32_t held = cache.layer(layer).slots_held, room = settings_.capacities[layer] + settings_.chunk_slots;
  require(uint64_t(held) + n_tokens <= room, KVC_ERROR_CAPACITY,
          [&] { return "layer " + std::to_string(layer) + " holds " + std::to_string(held) + " slots; " + std::to_string(n_tokens) +
              " more exceed its cache size " + std::to_string(settings_.capacities[layer]) + " + chunk_slots " +
              std::to_string(settings_.chunk_slots) + ": attend (which evicts) first, or raise kvc_eviction_params.chunk_slots"; });
}

namespace {

// Where a layer's decode_scores tensor holds the decode's logits (f32 [num_kv_heads][slots held][group],
// from 0), their log-sum-exps (f32 [num_q_heads]) and the victim's candidates, for up to
// `slot_stride` slots; every part at an offset any device's storage-buffer alignment allows
// (Vulkan's limit is at most 256 bytes).
struct DecodeScoresLayout {
  size_t lse_offset, candidates_offset, bytes;
};
DecodeScoresLayout decode_scores_layout(ops::EvictionRule rule, const CacheConfig& config, uint32_t slot_stride) {
  const auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t lse_offset = aligned(size_t(config.num_q_heads) * slot_stride * sizeof(float));
  const size_t candidates_offset = lse_offset + aligned(size_t(config.num_q_heads) * sizeof(float));
  return {lse_offset, candidates_offset, candidates_offset + ops::deferred_candidates_bytes(rule, config.num_kv_heads, slot_stride)};
}

}  // namespace

void EvictionPolicy::allocate(Cache& cache, uint32_t layer, LayerSteps& steps) const {
  const uint32_t slot_stride = cache.layer(layer).slot_stride;
  const size_t slots = size_t(cache.config().num_kv_heads) * slot_stride;
  if (ops::rule_keeps_sums(settings_.rule) && !steps.score_sums)
    steps.score_sums = std::make_unique<Tensor>(cache.backend(), slots * sizeof(float));
  if (ops::rule_keeps_counts(settings_.rule) && !steps.score_counts)
    steps.score_counts = std::make_unique<Tensor>(cache.backend(), slots * sizeof(uint32_t));
  if (needs_scores())
    ensure(steps.decode_scores, cache.backend(), decode_scores_layout(settings_.rule, cache.config(), slot_stride).bytes);
}

void EvictionPolicy::prefill_by_blocks(Cache& cache, uint32_t layer) {
  LayerState& state = cache.layer(layer);
  LayerSteps& steps = layers_[layer];
  const CacheConfig& config = cache.config();
  Backend& backend = cache.backend();
  // The observation window: the prompt's last block of queries (§4.2, following SnapKV).
  const uint32_t window_queries = std::min(settings_.prefill_block, state.last_queries);
  const size_t query_row = config.query_elements() * dtype_size(config.dtype);
  Tensor& queries = ensure(window_queries_, backend, window_queries * query_row);
  const View attend_queries = cache.attend_queries();
  backend.copy(*attend_queries.tensor, attend_queries.offset + size_t(state.last_queries - window_queries) * query_row, queries,
               0, window_queries * query_row);
  const size_t slots = size_t(config.num_kv_heads) * state.slot_stride;
  Tensor& window_scores = ensure(window_scores_, backend, slots * sizeof(float));
  ops::attention(backend, cache.attention_shape(layer, window_queries),
                 {view(queries), view(*state.k), view(*state.v), view(*state.positions), cache.turn_table(),
                  view(ensure(window_out_, backend, window_queries * query_row)), view(window_scores)});

  ops::TreePrefillShape shape;
  shape.num_kv_heads = config.num_kv_heads;
  shape.head_dim = config.head_dim;
  shape.slot_stride = state.slot_stride;
  shape.dtype = config.dtype;
  shape.slots_held = state.slots_held;
  shape.num_queries = window_queries;
  shape.sinks = settings_.sinks;
  shape.recent_window = settings_.recent_windows[layer];
  shape.capacity = settings_.capacities[layer];
  shape.block = settings_.prefill_block;
  ensure(spare_k_, backend, state.k->bytes());
  ensure(spare_v_, backend, state.v->bytes());
  ops::tree_prefill(backend, shape,
                    {view(*state.k), view(*state.v), view(*state.positions), view(window_scores), view(*spare_k_),
                     view(*spare_v_), view(*steps.score_sums), view(*steps.score_counts),
                     view(ensure(prefill_scratch_, backend, 3 * slots * sizeof(uint32_t)))});
  state.k.swap(spare_k_);
  state.v.swap(spare_v_);
  state.slots_held = ops::tree_block_layout(shape).kept;
  // Decoding builds a new tree over the compacted cache, from idx = 1.
  steps.tree_index = 0;
}

ops::EvictionShape EvictionPolicy::step_shape(const Cache& cache, uint32_t layer, uint32_t n_queries) const {
  const LayerState& state = cache.layer(layer);
  const LayerSteps& steps = layers_[layer];
  const uint32_t capacity = settings_.capacities[layer];
  ops::EvictionShape shape;
  shape.rule = settings_.rule;
  shape.num_kv_heads = cache.config().num_kv_heads;
  shape.num_q_heads = cache.config().num_q_heads;
  shape.head_dim = cache.config().head_dim;
  shape.slot_stride = state.slot_stride;
  shape.dtype = cache.config().dtype;
  shape.slots_held = state.slots_held;
  shape.new_slots = static_cast<uint32_t>(std::min<uint64_t>(state.tokens_seen - steps.scored_through, state.slots_held));
  shape.num_queries = n_queries;
  shape.sinks = settings_.sinks;
  shape.recent_window = settings_.recent_windows[layer];
  shape.evictions = state.slots_held > capacity ? state.slots_held - capacity : 0;
  shape.tree_span = capacity - settings_.sinks - settings_.recent_windows[layer];
  shape.tree_first = steps.tree_index;
  return shape;
}

ops::EvictionArgs EvictionPolicy::step_args(const Cache& cache, uint32_t layer, const StepScores& scores, View logits,
                                            View lse) const {
  const LayerState& state = cache.layer(layer);
  const LayerSteps& steps = layers_[layer];
  const auto optional = [](const std::shared_ptr<Tensor>& tensor) { return tensor ? view(*tensor) : View{}; };
  return {view(*state.k), view(*state.v), view(*state.positions), scores.probabilities, logits, lse,
          optional(steps.score_sums), optional(steps.score_counts)};
}

bool EvictionPolicy::record_attention(Cache& cache, uint32_t layer, uint32_t n_queries, View q, View out,
                                      const StepScores& scores) {
  // A decode step whose scores, if any, are its own logits: a caller's scores, or a chunk,
  // take attention and then the step (after_attend).
  if (n_queries != 1 || scores.probabilities) return false;
  LayerSteps& steps = layers_[layer];
  const ops::EvictionShape shape = step_shape(cache, layer, n_queries);
  if (shape.evictions == 0 && !needs_scores()) return false;
  allocate(cache, layer, steps);
  const LayerState& state = cache.layer(layer);
  // The decode's logits and lse, where the rule reads scores, in the layer's own tensor: a
  // step's end reads them after later layers' attention.
  const DecodeScoresLayout layout = decode_scores_layout(settings_.rule, cache.config(), state.slot_stride);
  const View logits = needs_scores() ? View{steps.decode_scores.get(), 0} : View{};
  const View lse = needs_scores() ? View{steps.decode_scores.get(), layout.lse_offset} : View{};
  const ops::AttentionArgs attention{q, view(*state.k), view(*state.v), view(*state.positions), cache.turn_table(), out,
                                     View{}, logits, lse};
  const ops::DecodeEvictArgs args{attention, step_args(cache, layer, StepScores{}, logits, lse)};
  Backend& backend = cache.backend();
  const ops::AttentionShape attention_shape = cache.attention_shape(layer, n_queries);
  if (!ops::can_defer_eviction(backend, shape, args.eviction)) {
    ops::decode_evict(backend, attention_shape, shape, args);
  } else if (backend.in_step()) {
    steps.deferred = ops::decode_evict_deferring(backend, attention_shape, shape, args,
                                                 View{steps.decode_scores.get(), layout.candidates_offset});
    cache.leave_for_step_end();
  } else {
    ops::evict_deferred(backend, {ops::decode_evict_deferring(backend, attention_shape, shape, args,
                                                              View{steps.decode_scores.get(), layout.candidates_offset})});
  }
  steps.step_recorded = true;
  return true;
}

void EvictionPolicy::settle(Cache& cache, uint32_t layer) {
  std::optional<ops::DeferredEviction>& deferred = layers_[layer].deferred;
  if (!deferred) return;
  ops::evict_deferred(cache.backend(), {*deferred});
  deferred.reset();
}

void EvictionPolicy::settle_all(Cache& cache) {
  std::vector<ops::DeferredEviction> evictions;
  for (const LayerSteps& steps : layers_)
    if (steps.deferred) evictions.push_back(*steps.deferred);
  if (evictions.empty()) return;
  ops::evict_deferred(cache.backend(), evictions);
  for (LayerSteps& steps : layers_) steps.deferred.reset();
}

void EvictionPolicy::after_attend(Cache& cache, uint32_t layer, const StepScores& scores) {
  LayerState& state = cache.layer(layer);
  LayerSteps& steps = layers_[layer];
  allocate(cache, layer, steps);
  const uint32_t capacity = settings_.capacities[layer];
  if (ops::rule_keeps_counts(settings_.rule) && state.last_queries > 1 && state.slots_held > capacity) {
    prefill_by_blocks(cache, layer);
    steps.scored_through = state.tokens_seen;
    state.last_append = 0;
    cache.count_compression();
    return;
  }
  const ops::EvictionShape shape = step_shape(cache, layer, state.last_queries);
  if (shape.evictions == 0 && !needs_scores()) return;  // StreamingLLM: nothing to do until full
  if (!std::exchange(steps.step_recorded, false)) ops::eviction_step(cache.backend(), shape, step_args(cache, layer, scores));
  steps.scored_through = state.tokens_seen;
  if (shape.evictions == 0) return;
  // Algorithm 1, line 16, as DESIGN.md resolves it: idx visits every scope of the region in turn.
  if (shape.tree_span > 0) steps.tree_index = (steps.tree_index + shape.evictions) % shape.tree_span;
  state.slots_held = capacity;
  // The newest tokens left the last slots: attending them again needs a new append.
  state.last_append = 0;
  cache.count_compression();
}

size_t EvictionPolicy::device_bytes_held() const {
  size_t total = 0;
  const auto add = [&](const std::shared_ptr<Tensor>& tensor) { total += tensor ? tensor->bytes() : 0; };
  for (const LayerSteps& steps : layers_) add(steps.score_sums), add(steps.score_counts), add(steps.decode_scores);
  for (const auto* tensor : {&window_queries_, &window_out_, &window_scores_, &prefill_scratch_, &spare_k_, &spare_v_}) add(*tensor);
  return total;
}

void EvictionPolicy::on_reset() {
  for (LayerSteps& steps : layers_) {
    steps.scored_through = 0;
    steps.tree_index = 0;
  }
}

}  // namespace kvc
