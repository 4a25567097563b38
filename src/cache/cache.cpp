#include "cache/cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/finite_check.h"
#include "ops/attention.h"
#include "ops/decode_append.h"

namespace kvc {
namespace {

void require_finite(const void* data, Dtype dtype, size_t count, const char* what) {
  const size_t bad = first_non_finite(data, dtype, count);
  if (bad < count) throw Error(KVC_ERROR_NOT_FINITE, std::string(what) + " holds NaN or Inf at element " + std::to_string(bad));
}

// A cache that stores keys rotated stores x cos - y sin and x sin + y cos of each rotary pair,
// which reach the pair's norm: refuse a pair whose norm passes the dtype's largest finite value
// (only elements of half that magnitude or more can make one: first_rotation_candidate).
void require_rotatable(const ops::RopeParams& rope, const void* k, Dtype dtype, size_t rows, uint32_t head_dim) {
  const size_t elements = rows * head_dim;
  const double largest = dtype == Dtype::F32 ? double(std::numeric_limits<float>::max()) : 65504.0;
  for (size_t at = first_rotation_candidate(k, dtype, elements); at < elements;) {
    const size_t row = at / head_dim;
    for (uint32_t pair = 0; pair < rope.rotary_dims / 2; ++pair) {
      uint32_t first, second;
      ops::rope_pair_dims(rope, pair, first, second);
      // In double: a float hypot rounds (-2.9, 65504) to 65504, which fits.
      const double norm = std::hypot(double(load_element(k, dtype, row * head_dim + first)), double(load_element(k, dtype, row * head_dim + second)));
      if (norm > largest)
        throw Error(KVC_ERROR_INVALID_ARGUMENT, "k holds at row " + std::to_string(row) + " (token x kv head) a rotary pair (dims " +
                                                    std::to_string(first) + ", " + std::to_string(second) + ") of norm " +
                                                    std::to_string(norm) + ": rotated, as this cache stores keys, it would pass the " +
                                                    std::string(dtype_name(dtype)) + " range");
    }
    const size_t next_row = (row + 1) * head_dim;
    at = next_row + first_rotation_candidate(static_cast<const unsigned char*>(k) + next_row * dtype_size(dtype), dtype, elements - next_row);
  }
}

}  // namespace

Cache::Cache(Backend& backend, const CacheConfig& config)
    : backend_(backend), config_(config), policy_(make_policy(config)) {
  config_.policy_params = nullptr;  // the policy copied what it needs
  const uint32_t slot_stride = policy_->slots_allocated();
  // Shaders bind each layer's K or V whole; every append's staged K and V is at most as large.
  require_within(size_product({config_.num_kv_heads, slot_stride, config_.head_dim, dtype_size(config_.dtype)}), backend.tensor_limit(),
                 "lower capacity or split the cache", [&] {
                   return "one layer's K (" + std::to_string(config_.num_kv_heads) + " kv heads x " + std::to_string(slot_stride) +
                          " slots x head_dim " + std::to_string(config_.head_dim) + " x " + std::to_string(dtype_size(config_.dtype)) +
                          " bytes)";
                 });
  layers_.resize(config_.num_layers);
  for (uint32_t layer = 0; layer < config_.num_layers; ++layer)
    replace_storage(layer, make_layer_storage(backend, config_, slot_stride), slot_stride);
  policy_->allocate_device_state(backend);
  if (config_.rope.enabled()) {
    const std::vector<uint32_t> turns = ops::rope_turn_table(config_.rope);
    rope_turns_ = std::make_unique<Tensor>(backend, turns.size() * sizeof(uint32_t));
    backend.begin();
    backend.upload(turns.data(), turns.size() * sizeof(uint32_t), *rope_turns_, 0);
    backend.submit();
  }
}

Cache::~Cache() {
  backend_.withdraw(*this);
  backend_.cancel_step_end(*this);
}

void Cache::save() {
  saved_ = std::make_unique<SavedState>(SavedState{layers_, policy_->clone(), compressions_, query_input_, attend_output_, attend_scores_});
}

void Cache::restore() {
  layers_ = std::move(saved_->layers);
  policy_ = std::move(saved_->policy);
  compressions_ = saved_->compressions;
  query_input_ = std::move(saved_->query_input);
  attend_output_ = std::move(saved_->attend_output);
  attend_scores_ = std::move(saved_->attend_scores);
  saved_.reset();
}

void Cache::begin_change() {
  backend_.begin();
  backend_.enlist(*this);
}

void Cache::replace_storage(uint32_t layer_index, LayerStorage storage, uint32_t slot_stride) {
  LayerState& layer = layers_[layer_index];
  layer.k = std::move(storage.k);
  layer.v = std::move(storage.v);
  layer.positions = std::move(storage.positions);
  layer.slot_stride = slot_stride;
}

size_t Cache::bytes_per_slot() const {
  return config_.num_kv_heads * (2 * config_.head_dim * dtype_size(config_.dtype) + sizeof(int32_t));
}

size_t Cache::device_bytes_held() const {
  size_t total = (rope_turns_ ? rope_turns_->bytes() : 0) + policy_->device_bytes_held();
  for (const LayerState& layer : layers_) total += layer.k->bytes() + layer.v->bytes() + layer.positions->bytes();
  return total;
}

void Cache::check_layer(uint32_t layer_index) const {
  require(layer_index < config_.num_layers, KVC_ERROR_OUT_OF_RANGE,
          [&] { return "layer " + std::to_string(layer_index) + " is past the cache's " + std::to_string(config_.num_layers) + " layers"; });
}

void Cache::check_append(uint32_t layer_index, uint32_t n_tokens) const {
  check_layer(layer_index);
  require(n_tokens >= 1, KVC_ERROR_INVALID_ARGUMENT, "n_tokens is 0");
  policy_->check_append(*this, layer_index, n_tokens);
}

void Cache::check_attend(uint32_t layer_index, uint32_t n_queries, bool with_scores) const {
  check_layer(layer_index);
  require(n_queries >= 1, KVC_ERROR_INVALID_ARGUMENT, "n_queries is 0");
  const LayerState& layer = layers_[layer_index];
  require(layer.last_append > 0, KVC_ERROR_BAD_STATE,
          [&] { return "layer " + std::to_string(layer_index) + " has no appended tokens to attend from: append the chunk's K/V first"; });
  require(n_queries <= layer.last_append, KVC_ERROR_BAD_STATE,
          [&] { return std::to_string(n_queries) + " queries, but the last append of layer " + std::to_string(layer_index) + " held " +
              std::to_string(layer.last_append) + " tokens: queries are the newest appended tokens"; });
  check_queries(layer_index, n_queries, with_scores);
}

void Cache::check_decode(uint32_t layer_index) const {
  check_append(layer_index, 1);
  check_queries(layer_index, 1, false);
}

void Cache::check_queries(uint32_t layer_index, uint32_t n_queries, bool with_scores) const {
  // Q and the output are bound whole; a prefill chunk of many queries may pass that limit
  // where its K and V (fewer heads) did not.
  require_within(size_product({n_queries, config_.num_q_heads, config_.head_dim, dtype_size(config_.dtype)}), backend_.tensor_limit(),
                 "attend in smaller chunks", [&] {
                   return "Q of " + std::to_string(n_queries) + " queries (x " + std::to_string(config_.num_q_heads) +
                          " query heads x head_dim " + std::to_string(config_.head_dim) + " x " + std::to_string(dtype_size(config_.dtype)) +
                          " bytes)";
                 });
  policy_->check_attend(*this, layer_index, n_queries, with_scores);
}

void Cache::append_host(uint32_t layer_index, uint32_t n_tokens, const void* k, const void* v) {
  check_append(layer_index, n_tokens);
  require(k != nullptr && v != nullptr, KVC_ERROR_NULL_POINTER, "kvc_cache_append: k or v is NULL");
  // At most one layer's K, which the constructor found within the backend's tensor limit.
  const size_t elements = size_t(n_tokens) * config_.token_elements();
  require_finite(k, config_.dtype, elements, "k");
  require_finite(v, config_.dtype, elements, "v");
  if (keys_rotated()) require_rotatable(config_.rope, k, config_.dtype, size_t(n_tokens) * config_.num_kv_heads, config_.head_dim);
  // Staged as they come; the append scatters them to the cache's layout on the device.
  const size_t bytes = elements * dtype_size(config_.dtype);
  begin_change();
  Tensor& k_staged = backend_.scratch(ScratchId::AppendKeys, bytes);
  Tensor& v_staged = backend_.scratch(ScratchId::AppendValues, bytes);
  backend_.upload(k, bytes, k_staged, 0);
  backend_.upload(v, bytes, v_staged, 0);
  record_append(layer_index, n_tokens, view(k_staged), view(v_staged));
  backend_.submit();
}

void Cache::append_device(uint32_t layer_index, uint32_t n_tokens, View k, View v) {
  begin_change();
  record_append(layer_index, n_tokens, k, v);
  backend_.submit();
}

void Cache::record_append(uint32_t layer_index, uint32_t n_tokens, View k, View v) {
  const std::vector<ops::AppendEntry> rows = plan_append(layer_index, n_tokens, k, v);
  for (const ops::AppendEntry& row : rows) ops::append_rows(backend_, row.shape, row.args);
  finish_append(layer_index, n_tokens, rows);
}

std::vector<ops::AppendEntry> Cache::plan_append(uint32_t layer_index, uint32_t n_tokens, View k, View v) {
  policy_->settle(*this, layer_index);
  const LayerState& layer = layers_[layer_index];
  const AppendPlacement placement = policy_->place_append(*this, layer_index, n_tokens);
  ops::AppendRowsShape shape;
  shape.num_kv_heads = config_.num_kv_heads;
  shape.head_dim = config_.head_dim;
  shape.slot_stride = layer.slot_stride;
  shape.first_slot = placement.first_slot;
  shape.num_tokens = std::min(n_tokens, placement.wrap_after);
  shape.first_position = policy_->position_for_slot(*this, layer_index, placement.first_slot, layer.tokens_seen);
  shape.dtype = config_.dtype;
  if (keys_rotated()) shape.rope = config_.rope;
  const ops::AppendRowsArgs args{k, v, view(*layer.k), view(*layer.v), view(*layer.positions), turn_table()};
  std::vector<ops::AppendEntry> rows{{shape, args}};
  if (n_tokens > shape.num_tokens) {  // the rest of a chunk that wraps around a ring
    shape.first_position += int32_t(shape.num_tokens);
    shape.source_token = shape.num_tokens;
    shape.first_slot = placement.wrap_slot;
    shape.num_tokens = n_tokens - shape.num_tokens;
    rows.push_back({shape, args});
  }
  return rows;
}

void Cache::finish_append(uint32_t layer_index, uint32_t n_tokens, const std::vector<ops::AppendEntry>& rows) {
  LayerState& layer = layers_[layer_index];
  uint32_t end_slot = 0;
  for (const ops::AppendEntry& row : rows) end_slot = std::max(end_slot, row.shape.first_slot + row.shape.num_tokens);
  policy_->appended(*this, layer_index, n_tokens);
  layer.slots_held = std::max(layer.slots_held, end_slot);
  layer.last_append = n_tokens;
  layer.tokens_seen += n_tokens;
}

ops::AttentionShape Cache::attention_shape(uint32_t layer_index, uint32_t n_queries) const {
  ops::AttentionShape shape;
  shape.num_q_heads = config_.num_q_heads;
  shape.num_kv_heads = config_.num_kv_heads;
  shape.head_dim = config_.head_dim;
  shape.num_queries = n_queries;
  shape.num_slots = layers_[layer_index].slots_held;
  shape.slot_stride = layers_[layer_index].slot_stride;
  shape.dtype = config_.dtype;
  shape.rope = config_.rope;
  shape.keys_rotated = keys_rotated();
  return shape;
}

void Cache::attend_host(uint32_t layer_index, uint32_t n_queries, const void* q, void* out, float* scores) {
  check_attend(layer_index, n_queries, scores != nullptr);
  require(q != nullptr && out != nullptr, KVC_ERROR_NULL_POINTER, "kvc_attend: q or out is NULL");
  require(!backend_.in_external_step(), KVC_ERROR_BAD_STATE,
          "kvc_attend writes host memory, which a step recorded into the application's command buffer cannot: "
          "use kvc_attend_device");
  const size_t q_elements = size_t(n_queries) * config_.query_elements();
  require_finite(q, config_.dtype, q_elements, "q");

  const size_t q_bytes = q_elements * dtype_size(config_.dtype);
  const size_t score_bytes = size_t(config_.num_kv_heads) * layers_[layer_index].slots_held * sizeof(float);
  begin_change();
  Tensor& q_dev = ensure(query_input_, backend_, q_bytes);
  Tensor& out_dev = ensure(attend_output_, backend_, q_bytes);
  backend_.upload(q, q_bytes, q_dev, 0);
  const View scores_dev = scores ? view(ensure(attend_scores_, backend_, score_bytes)) : View{};
  const StepScores policy_scores = record_attention(layer_index, n_queries, view(q_dev), view(out_dev), scores_dev);
  backend_.download(out_dev, 0, out, q_bytes);
  if (scores) backend_.download(*scores_dev.tensor, 0, scores, score_bytes);
  finish_attend(layer_index, n_queries, view(q_dev), policy_scores);
  backend_.submit();
}

void Cache::attend_device(uint32_t layer_index, uint32_t n_queries, View q, View out, View scores) {
  begin_change();
  const StepScores policy_scores = record_attention(layer_index, n_queries, q, out, scores);
  finish_attend(layer_index, n_queries, q, policy_scores);
  backend_.submit();
}

void Cache::decode_device(uint32_t layer_index, View k, View v, View q, View out) {
  begin_change();
  const std::vector<ops::AppendEntry> rows = plan_append(layer_index, 1, k, v);
  const bool inside = policy_->appends_inside_decode() && !policy_->needs_scores() && !policy_->attends_itself() && rows.size() == 1 &&
                      rows[0].shape.first_slot == layers_[layer_index].slots_held;
  if (!inside)
    for (const ops::AppendEntry& row : rows) ops::append_rows(backend_, row.shape, row.args);
  finish_append(layer_index, 1, rows);
  const StepScores policy_scores = record_attention(layer_index, 1, q, out, View{}, inside ? rows.data() : nullptr);
  finish_attend(layer_index, 1, q, policy_scores);
  backend_.submit();
}

bool Cache::batchable(View scores) const {
  return !scores && !policy_->attends_itself() && !policy_->needs_scores();
}

ops::DecodeEntry Cache::decode_entry(uint32_t layer_index, View q, View out) {
  policy_->settle(*this, layer_index);
  const LayerState& layer = layers_[layer_index];
  return {attention_shape(layer_index, 1), {q, view(*layer.k), view(*layer.v), view(*layer.positions), turn_table(), out}};
}

void Cache::finish_batched_decode(uint32_t layer_index, View q) {
  layers_[layer_index].last_queries = 1;
  finish_attend(layer_index, 1, q, StepScores{});
}

void Cache::record_decode(uint32_t layer_index, View q, View out, View scores) {
  const StepScores policy_scores = record_attention(layer_index, 1, q, out, scores);
  finish_attend(layer_index, 1, q, policy_scores);
}

StepScores Cache::record_attention(uint32_t layer_index, uint32_t n_queries, View q, View out, View scores, const ops::AppendEntry* token) {
  policy_->settle(*this, layer_index);
  LayerState& layer = layers_[layer_index];
  StepScores step{scores};
  if (!scores && policy_->needs_scores() && !(n_queries == 1 && policy_->takes_decode_logits()))
    step.probabilities = view(ensure(attend_scores_, backend_, size_t(config_.num_kv_heads) * layer.slots_held * sizeof(float)));
  const ops::AttentionArgs args{q, view(*layer.k), view(*layer.v), view(*layer.positions), turn_table(), out, step.probabilities};
  if (token) ops::decode_append(backend_, attention_shape(layer_index, n_queries), args, *token);  // appends_inside_decode
  else if (!policy_->record_attention(*this, layer_index, n_queries, q, out, step))
    ops::attention(backend_, attention_shape(layer_index, n_queries), args);
  layer.last_queries = n_queries;
  return step;
}

void Cache::finish_attend(uint32_t layer_index, uint32_t n_queries, View q, const StepScores& scores) {
  attend_queries_ = q;
  policy_->after_attend(*this, layer_index, scores);
  policy_->observe_queries(*this, layer_index, q, n_queries);
  attend_queries_ = View{};
}

void Cache::end_prefill() {
  begin_change();
  policy_->settle_all(*this);
  policy_->end_prefill(*this);
  backend_.submit();
}

void Cache::read(uint32_t layer_index, uint32_t max_slots, void* k, void* v, int32_t* positions) {
  check_layer(layer_index);
  const LayerState& layer = layers_[layer_index];
  const uint32_t slots = policy_->read_slots(*this, layer_index);
  require(max_slots >= slots, KVC_ERROR_BUFFER_TOO_SMALL, [&] {
    return "max_slots is " + std::to_string(max_slots) + " but layer " + std::to_string(layer_index) + " reads as " +
         std::to_string(slots) + " slots";
  });
  if (policy_->read(*this, layer_index, k, v, positions)) return;
  const size_t row_bytes = size_t(config_.head_dim) * dtype_size(config_.dtype);
  const size_t held = layer.slots_held;
  // Keys stored rotated are rotated back by their positions, which are read for that if the
  // caller asked for none.
  const bool unrotate = k && keys_rotated();
  std::vector<int32_t> own_positions(unrotate && !positions ? size_t(config_.num_kv_heads) * held : 0);
  int32_t* positions_out = unrotate && !positions ? own_positions.data() : positions;
  backend_.begin();
  for (uint32_t head = 0; head < config_.num_kv_heads; ++head) {
    const size_t first_slot = size_t(head) * layer.slot_stride;
    if (k) backend_.download(*layer.k, first_slot * row_bytes, static_cast<unsigned char*>(k) + head * held * row_bytes, held * row_bytes);
    if (v) backend_.download(*layer.v, first_slot * row_bytes, static_cast<unsigned char*>(v) + head * held * row_bytes, held * row_bytes);
    if (positions_out)
      backend_.download(*layer.positions, first_slot * sizeof(int32_t), positions_out + head * held, held * sizeof(int32_t));
  }
  backend_.submit();
  if (!unrotate) return;
  const std::vector<double> inv_freq = ops::rope_inverse_frequencies(config_.rope);
  std::vector<float> row(config_.head_dim);
  for (size_t index = 0; index < size_t(config_.num_kv_heads) * held; ++index) {
    const size_t first = index * config_.head_dim;
    for (uint32_t d = 0; d < config_.head_dim; ++d) row[d] = load_element(k, config_.dtype, first + d);
    ops::rope_rotate_row(config_.rope, inv_freq, row.data(), -int64_t(positions_out[index]));  // the inverse rotation
    for (uint32_t d = 0; d < config_.head_dim; ++d) store_element(k, config_.dtype, first + d, row[d]);
  }
}

void Cache::reset() {
  const uint32_t slot_stride = policy_->slots_allocated();
  // A compacted layer grows back: all of the new storage is allocated before anything changes,
  // so an allocation that fails leaves the cache as it was.
  std::vector<LayerStorage> grown(layers_.size());
  for (size_t index = 0; index < layers_.size(); ++index)
    if (layers_[index].slot_stride != slot_stride) grown[index] = make_layer_storage(backend_, config_, slot_stride);
  for (size_t index = 0; index < layers_.size(); ++index) {
    LayerState& layer = layers_[index];
    if (grown[index].k) replace_storage(uint32_t(index), std::move(grown[index]), slot_stride);
    layer.slots_held = 0;
    layer.last_append = 0;
    layer.tokens_seen = 0;
    layer.last_queries = 0;
  }
  compressions_ = 0;
  policy_->on_reset();
}

}  // namespace kvc
