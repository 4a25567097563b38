#include "cache/cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ops/attention.h"

namespace kvc {
namespace {

// Grows `tensor` to hold at least `bytes` (contents are not kept).
Tensor& ensure(std::unique_ptr<Tensor>& tensor, Backend& backend, size_t bytes) {
  if (!tensor || tensor->bytes() < bytes) tensor = std::make_unique<Tensor>(backend, bytes);
  return *tensor;
}

void require_finite(const void* data, Dtype dtype, size_t count, const char* what) {
  for (size_t i = 0; i < count; ++i)
    require(std::isfinite(load_element(data, dtype, i)), KVC_ERROR_NOT_FINITE,
            std::string(what) + " holds NaN or Inf at element " + std::to_string(i));
}

}  // namespace

Cache::Cache(Backend& backend, const CacheConfig& config)
    : backend_(backend), config_(config), policy_(make_policy(config)) {
  config_.policy_params = nullptr;  // the policy copied what it needs
  slot_stride_ = policy_->slots_allocated();
  const size_t layer_kv_bytes = size_t(config_.num_kv_heads) * slot_stride_ * config_.head_dim * dtype_size(config_.dtype);
  if (!backend.is_cpu()) {
    // Shaders index elements with 32-bit integers and bind each layer's K or V whole.
    const uint64_t max_range = std::min<uint64_t>(backend.max_buffer_bytes(), uint64_t(1) << 32);
    require(layer_kv_bytes <= max_range, KVC_ERROR_CAPACITY,
            "one layer's K takes " + std::to_string(layer_kv_bytes) + " bytes; the device binds at most " +
                std::to_string(max_range) + ": lower capacity or split the cache");
  }
  layers_.resize(config_.num_layers);
  for (LayerState& layer : layers_) {
    layer.k = std::make_unique<Tensor>(backend, layer_kv_bytes);
    layer.v = std::make_unique<Tensor>(backend, layer_kv_bytes);
    layer.positions = std::make_unique<Tensor>(backend, size_t(config_.num_kv_heads) * slot_stride_ * sizeof(int32_t));
  }
  policy_->allocate_device_state(backend);
  if (config_.rope.enabled()) {
    const std::vector<uint32_t> turns = ops::rope_turn_table(config_.rope);
    rope_turns_ = std::make_unique<Tensor>(backend, turns.size() * sizeof(uint32_t));
    backend.begin();
    backend.upload(turns.data(), turns.size() * sizeof(uint32_t), *rope_turns_, 0);
    backend.submit();
  }
}

size_t Cache::bytes_per_slot() const {
  return config_.num_kv_heads * (2 * config_.head_dim * dtype_size(config_.dtype) + sizeof(int32_t));
}

size_t Cache::device_bytes_held() const {
  size_t total = rope_turns_ ? rope_turns_->bytes() : 0;
  for (const LayerState& layer : layers_) total += layer.k->bytes() + layer.v->bytes() + layer.positions->bytes();
  return total;
}

void Cache::append(uint32_t layer_index, uint32_t n_tokens, const void* k, const void* v) {
  require(layer_index < config_.num_layers, KVC_ERROR_OUT_OF_RANGE,
          "layer " + std::to_string(layer_index) + " is past the cache's " + std::to_string(config_.num_layers) + " layers");
  require(n_tokens >= 1, KVC_ERROR_INVALID_ARGUMENT, "n_tokens is 0");
  require(k != nullptr && v != nullptr, KVC_ERROR_NULL_POINTER, "kvc_cache_append: k or v is NULL");
  const size_t elements = size_t(n_tokens) * config_.token_elements();
  require_finite(k, config_.dtype, elements, "k");
  require_finite(v, config_.dtype, elements, "v");
  policy_->check_append(*this, layer_index, n_tokens);

  LayerState& layer = layers_[layer_index];
  const size_t row_bytes = size_t(config_.head_dim) * dtype_size(config_.dtype);
  // Host layout [token][kv_head][dim] -> per kv head, n_tokens contiguous rows.
  std::vector<unsigned char> k_heads(elements * dtype_size(config_.dtype)), v_heads(k_heads.size());
  std::vector<int32_t> positions(n_tokens);
  for (uint32_t token = 0; token < n_tokens; ++token) {
    positions[token] = policy_->position_for_slot(*this, layer_index, layer.slots_held + token, layer.tokens_seen + token);
    for (uint32_t head = 0; head < config_.num_kv_heads; ++head) {
      const size_t from = (size_t(token) * config_.num_kv_heads + head) * row_bytes;
      const size_t to = (size_t(head) * n_tokens + token) * row_bytes;
      std::memcpy(&k_heads[to], static_cast<const unsigned char*>(k) + from, row_bytes);
      std::memcpy(&v_heads[to], static_cast<const unsigned char*>(v) + from, row_bytes);
    }
  }
  backend_.begin();
  for (uint32_t head = 0; head < config_.num_kv_heads; ++head) {
    const size_t first_slot = size_t(head) * slot_stride_ + layer.slots_held;
    backend_.upload(&k_heads[size_t(head) * n_tokens * row_bytes], n_tokens * row_bytes, *layer.k, first_slot * row_bytes);
    backend_.upload(&v_heads[size_t(head) * n_tokens * row_bytes], n_tokens * row_bytes, *layer.v, first_slot * row_bytes);
    backend_.upload(positions.data(), n_tokens * sizeof(int32_t), *layer.positions, first_slot * sizeof(int32_t));
  }
  backend_.submit();
  layer.slots_held += n_tokens;
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
  shape.slot_stride = slot_stride_;
  shape.dtype = config_.dtype;
  shape.rope = config_.rope;
  return shape;
}

void Cache::attend(uint32_t layer_index, uint32_t n_queries, const void* q, void* out, float* scores) {
  require(layer_index < config_.num_layers, KVC_ERROR_OUT_OF_RANGE,
          "layer " + std::to_string(layer_index) + " is past the cache's " + std::to_string(config_.num_layers) + " layers");
  require(n_queries >= 1, KVC_ERROR_INVALID_ARGUMENT, "n_queries is 0");
  require(q != nullptr && out != nullptr, KVC_ERROR_NULL_POINTER, "kvc_attend: q or out is NULL");
  LayerState& layer = layers_[layer_index];
  require(layer.last_append > 0, KVC_ERROR_BAD_STATE,
          "layer " + std::to_string(layer_index) + " has no appended tokens to attend from: append the chunk's K/V first");
  require(n_queries <= layer.last_append, KVC_ERROR_BAD_STATE,
          std::to_string(n_queries) + " queries, but the last append of layer " + std::to_string(layer_index) + " held " +
              std::to_string(layer.last_append) + " tokens: queries are the newest appended tokens");
  const size_t q_elements = size_t(n_queries) * config_.query_elements();
  require_finite(q, config_.dtype, q_elements, "q");

  const size_t q_bytes = q_elements * dtype_size(config_.dtype);
  const size_t score_bytes = size_t(config_.num_kv_heads) * layer.slots_held * sizeof(float);
  const bool want_scores = scores != nullptr || policy_->needs_scores();
  backend_.begin();
  Tensor& q_dev = ensure(query_input_, backend_, q_bytes);
  Tensor& out_dev = ensure(attend_output_, backend_, q_bytes);
  Tensor* scores_dev = want_scores ? &ensure(attend_scores_, backend_, score_bytes) : nullptr;
  backend_.upload(q, q_bytes, q_dev, 0);
  const ops::AttentionShape shape = attention_shape(layer_index, n_queries);
  const ops::AttentionArgs args{view(q_dev), view(*layer.k), view(*layer.v), view(*layer.positions), turn_table(),
                                view(out_dev), scores_dev ? view(*scores_dev) : View{}};
  ops::attention(backend_, shape, args);
  backend_.download(out_dev, 0, out, q_bytes);
  if (scores) backend_.download(*scores_dev, 0, scores, score_bytes);
  layer.last_queries = n_queries;
  policy_->after_attend(*this, layer_index, scores_dev ? view(*scores_dev) : View{});
  backend_.submit();
  policy_->observe_queries(*this, layer_index, q, n_queries);
}

void Cache::read(uint32_t layer_index, uint32_t max_slots, void* k, void* v, int32_t* positions) {
  require(layer_index < config_.num_layers, KVC_ERROR_OUT_OF_RANGE,
          "layer " + std::to_string(layer_index) + " is past the cache's " + std::to_string(config_.num_layers) + " layers");
  const LayerState& layer = layers_[layer_index];
  require(max_slots >= layer.slots_held, KVC_ERROR_BUFFER_TOO_SMALL,
          "max_slots is " + std::to_string(max_slots) + " but layer " + std::to_string(layer_index) + " holds " +
              std::to_string(layer.slots_held) + " slots");
  const size_t row_bytes = size_t(config_.head_dim) * dtype_size(config_.dtype);
  const size_t held = layer.slots_held;
  backend_.begin();
  for (uint32_t head = 0; head < config_.num_kv_heads; ++head) {
    const size_t first_slot = size_t(head) * slot_stride_;
    if (k) backend_.download(*layer.k, first_slot * row_bytes, static_cast<unsigned char*>(k) + head * held * row_bytes, held * row_bytes);
    if (v) backend_.download(*layer.v, first_slot * row_bytes, static_cast<unsigned char*>(v) + head * held * row_bytes, held * row_bytes);
    if (positions) backend_.download(*layer.positions, first_slot * sizeof(int32_t), positions + head * held, held * sizeof(int32_t));
  }
  backend_.submit();
}

void Cache::reset() {
  for (LayerState& layer : layers_) {
    layer.slots_held = 0;
    layer.last_append = 0;
    layer.tokens_seen = 0;
    layer.last_queries = 0;
  }
  compressions_ = 0;
  policy_->on_reset();
}

}  // namespace kvc
