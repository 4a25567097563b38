#include "policies/fourier.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "cache/cache.h"
#include "ops/compact.h"
#include "ops/fourier_attention.h"
#include "ops/fourier_fold.h"
#include "ops/gather_dims.h"
#include "ops/hippo_fourier.h"

namespace kvc {
namespace {

constexpr uint32_t kMaxWindowLength = 1u << 24;  // ops/hippo_fourier.h: angles exact in f32

// Sec. 4.1's inverted pyramid, in the order of the authors' code: the last 8 layers first.
void pyramid_ratios(uint32_t layer, uint32_t num_layers, float& key_ratio, float& value_ratio) {
  if (layer + 8 >= num_layers) {
    key_ratio = 0.5f, value_ratio = 0.7f;
  } else if (layer < 4) {
    key_ratio = 0.9f, value_ratio = 0.95f;
  } else {
    key_ratio = 0.8f, value_ratio = 0.8f;
  }
}

uint32_t dims_for(float ratio, uint32_t head_dim) {
  return std::clamp(uint32_t(std::lround(double(ratio) * head_dim)), 1u, head_dim - 1);
}

// A caller's table of one layer ([num_kv_heads][head_dim], nonzero compresses) as a plan.
FourierDimsPlan plan_from_mask(const uint8_t* mask, uint32_t layer, const CacheConfig& config, const char* field) {
  const uint32_t dim = config.head_dim;
  FourierDimsPlan plan;
  for (uint32_t head = 0; head < config.num_kv_heads; ++head) {
    const uint8_t* row = mask + (size_t(layer) * config.num_kv_heads + head) * dim;
    std::vector<uint32_t> compressed, kept;
    for (uint32_t d = 0; d < dim; ++d) (row[d] ? compressed : kept).push_back(d);
    require(compressed.size() >= 1 && kept.size() >= 1, KVC_ERROR_INVALID_ARGUMENT, [&] {
      return std::string("kvc_fourier_params.") + field + " compresses " + std::to_string(compressed.size()) + " dims of layer " +
             std::to_string(layer) + ", kv head " + std::to_string(head) + "; it must compress 1.." + std::to_string(dim - 1);
    });
    if (head == 0) plan.compressed = uint32_t(compressed.size());
    require(compressed.size() == plan.compressed, KVC_ERROR_INVALID_ARGUMENT, [&] {
      return std::string("kvc_fourier_params.") + field + " compresses " + std::to_string(compressed.size()) + " dims of layer " +
             std::to_string(layer) + ", kv head " + std::to_string(head) + " but " + std::to_string(plan.compressed) +
             " of its kv head 0; every kv head of a layer must compress as many";
    });
    plan.table.insert(plan.table.end(), compressed.begin(), compressed.end());
    plan.table.insert(plan.table.end(), kept.begin(), kept.end());
  }
  return plan;
}

std::vector<FourierDimsPlan> plans_for(const CacheConfig& config, const float* ratios, const uint8_t* mask, bool keys) {
  const char* ratio_field = keys ? "key_ratios" : "value_ratios";
  std::vector<FourierDimsPlan> plans(config.num_layers);
  for (uint32_t layer = 0; layer < config.num_layers; ++layer) {
    if (mask) {
      plans[layer] = plan_from_mask(mask, layer, config, keys ? "key_dims" : "value_dims");
      continue;
    }
    float key_ratio, value_ratio;
    pyramid_ratios(layer, config.num_layers, key_ratio, value_ratio);
    const float ratio = ratios ? ratios[layer] : (keys ? key_ratio : value_ratio);
    require(std::isfinite(ratio) && ratio > 0.0f && ratio < 1.0f, KVC_ERROR_INVALID_ARGUMENT, [&] {
      return std::string("kvc_fourier_params.") + ratio_field + "[" + std::to_string(layer) + "] is " + std::to_string(ratio) +
             "; it must lie strictly between 0 and 1";
    });
    plans[layer].compressed = dims_for(ratio, config.head_dim);
  }
  return plans;
}

kvc_fourier_params checked_params(const CacheConfig& config) {
  kvc_fourier_params params = kvc_fourier_params_default();
  if (config.policy_params) {
    const auto* given = static_cast<const kvc_fourier_params*>(config.policy_params);
    require(given->struct_size >= sizeof(kvc_fourier_params), KVC_ERROR_INVALID_ARGUMENT,
            "kvc_fourier_params.struct_size is " + std::to_string(given->struct_size) + "; set it to sizeof(kvc_fourier_params)");
    params = *given;
  }
  require(!config.rope.enabled(), KVC_ERROR_UNSUPPORTED,
          "FOURIER compresses keys as the model stores them, after RoPE: create the cache with rope_style KVC_ROPE_NONE and "
          "append rotated keys");
  require(uint64_t(params.sinks) + params.local_window < config.capacity, KVC_ERROR_INVALID_ARGUMENT,
          "kvc_fourier_params.sinks + local_window = " + std::to_string(uint64_t(params.sinks) + params.local_window) +
              "; it must be below capacity (" + std::to_string(config.capacity) + ") to leave a middle");
  require(params.local_window >= 1, KVC_ERROR_INVALID_ARGUMENT, "kvc_fourier_params.local_window is 0; it must be at least 1");
  require(params.num_states >= 1, KVC_ERROR_INVALID_ARGUMENT, "kvc_fourier_params.num_states is 0; it must be at least 1");
  // The Vulkan kernels give a workgroup to each bin and block of 64 dims (projection) and to
  // each block of 64 held tokens (decode logits), within the 65535 any device allows.
  const uint64_t dim_blocks = (config.head_dim + 63) / 64;
  require(uint64_t(params.num_states) * dim_blocks <= 65535, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "kvc_fourier_params.num_states is " + std::to_string(params.num_states) + "; at head_dim " + std::to_string(config.head_dim) +
           " FOURIER allows at most " + std::to_string(65535 / dim_blocks);
  });
  require(uint64_t(config.capacity) <= 65535ull * 64, KVC_ERROR_INVALID_ARGUMENT,
          [&] { return "capacity is " + std::to_string(config.capacity) + "; FOURIER allows at most " + std::to_string(65535ull * 64); });
  const uint32_t window = params.window_length ? params.window_length : config.capacity;
  const uint32_t middle_capacity = config.capacity - params.sinks - params.local_window;
  require(window <= kMaxWindowLength && uint64_t(2) * params.num_states <= window && window >= middle_capacity,
          KVC_ERROR_INVALID_ARGUMENT, [&] {
            return "kvc_fourier_params.window_length is " + std::to_string(window) + (params.window_length ? "" : " (capacity)") +
                   "; it must lie in max(2 num_states, capacity - sinks - local_window) = " +
                   std::to_string(std::max<uint64_t>(uint64_t(2) * params.num_states, middle_capacity)) + " .. " +
                   std::to_string(kMaxWindowLength);
          });
  params.window_length = window;
  return params;
}

}  // namespace

std::unique_ptr<Policy> make_fourier_policy(const CacheConfig& config) {
  const kvc_fourier_params params = checked_params(config);
  return std::make_unique<FourierPolicy>(config, params, plans_for(config, params.key_ratios, params.key_dims, true),
                                         plans_for(config, params.value_ratios, params.value_dims, false));
}

FourierPolicy::FourierPolicy(const CacheConfig& config, const kvc_fourier_params& params, std::vector<FourierDimsPlan> key_plans,
                             std::vector<FourierDimsPlan> value_plans)
    : capacity_(config.capacity),
      sinks_(params.sinks),
      local_window_(params.local_window),
      num_states_(params.num_states),
      window_length_(params.window_length),
      config_(config),
      key_plans_(std::move(key_plans)),
      value_plans_(std::move(value_plans)),
      layers_(config.num_layers) {
  config_.policy_params = nullptr;
}

void FourierPolicy::allocate_device_state(Backend& backend) {
  const uint32_t heads = config_.num_kv_heads, dim = config_.head_dim;
  ops::FourierAttentionShape attention;
  attention.num_q_heads = config_.num_q_heads;
  attention.num_states = num_states_;
  attention.window_length = window_length_;
  attention_plan_ = ops::fourier_attention_prepare(backend, attention);  // a length VkFFT refuses fails the cache's creation
  if (compression_shape(middle_capacity()).route == ops::HippoFourierRoute::Transform)
    compression_plan_ = ops::hippo_fourier_prepare(backend, compression_shape(middle_capacity()));
  auto table = [&](const std::vector<uint32_t>& values) {
    auto tensor = std::make_unique<Tensor>(backend, values.size() * 4);
    backend.upload(values.data(), values.size() * 4, *tensor, 0);
    return tensor;
  };
  backend.begin();
  std::vector<uint32_t> identity(size_t(heads) * dim), sinks(size_t(heads) * sinks_);
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = uint32_t(i % dim);
  for (size_t i = 0; i < sinks.size(); ++i) sinks[i] = uint32_t(i % sinks_);
  identity_dims_ = table(identity);
  if (sinks_ > 0) sink_indices_ = table(sinks);
  std::vector<uint32_t> bins(num_states_);
  std::iota(bins.begin(), bins.end(), 0u);
  bins_ = table(bins);
  for (uint32_t layer = 0; layer < config_.num_layers; ++layer) {
    layers_[layer].key.compressed = key_plans_[layer].compressed;
    layers_[layer].value.compressed = value_plans_[layer].compressed;
    if (!key_plans_[layer].table.empty()) layers_[layer].key.caller_dims = table(key_plans_[layer].table);
    if (!value_plans_[layer].table.empty()) layers_[layer].value.caller_dims = table(value_plans_[layer].table);
  }
  backend.submit();
}

void FourierPolicy::check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const {
  const uint64_t seen = cache.layer(layer).tokens_seen;
  require(seen + n_tokens <= capacity_, KVC_ERROR_CAPACITY, [&] {
    return "layer " + std::to_string(layer) + " has taken " + std::to_string(seen) + " tokens; FOURIER holds at most capacity = " +
           std::to_string(capacity_) + " (its translated window covers no more), so " + std::to_string(n_tokens) + " more do not fit";
  });
  if (layers_[layer].compressed)
    require(n_tokens <= local_window_, KVC_ERROR_CAPACITY, [&] {
      return std::to_string(n_tokens) + " tokens in one append to compressed layer " + std::to_string(layer) +
             "; FOURIER takes at most local_window = " + std::to_string(local_window_) + " at a time (they replace the window's oldest)";
    });
}

int32_t FourierPolicy::position_for_slot(const Cache&, uint32_t, uint32_t, uint64_t token_index) const {
  return static_cast<int32_t>(token_index);
}

void FourierPolicy::end_prefill(Cache& cache) {
  require(!prefill_ended_, KVC_ERROR_BAD_STATE, "kvc_cache_end_prefill was already called; reset the cache to start a new prompt");
  for (uint32_t layer = 0; layer < config_.num_layers; ++layer)
    if (cache.layer(layer).slots_held > compress_above()) compress(cache, layer);
  prefill_ended_ = true;
}

void FourierPolicy::after_attend(Cache& cache, uint32_t layer, const StepScores&) {
  if (!prefill_ended_ || layers_[layer].compressed || cache.layer(layer).slots_held <= compress_above()) return;
  compress(cache, layer);
  cache.layer(layer).last_append = 0;  // its tokens moved: attending from them again is refused
}

void FourierPolicy::compress(Cache& cache, uint32_t layer_index) {
  Backend& backend = cache.backend();
  LayerState& layer = cache.layer(layer_index);
  LayerMiddle& middle = layers_[layer_index];
  const uint32_t held = layer.slots_held;
  middle.middle_length = held - sinks_ - local_window_;
  middle.ring_start = 0;
  compress_middle(backend, layer_index, true, *layer.k, layer.slot_stride, middle.middle_length);
  compress_middle(backend, layer_index, false, *layer.v, layer.slot_stride, middle.middle_length);

  // The sinks and the local window move into storage of their own size; the prompt's goes.
  const uint32_t kept_slots = sinks_ + local_window_;
  LayerStorage kept = make_layer_storage(backend, config_, kept_slots);
  const ops::CompactShape move{config_.num_kv_heads, config_.head_dim, layer.slot_stride, sinks_,        sinks_,
                               held - local_window_,  local_window_,    config_.dtype,     kept_slots};
  const View indices = sink_indices_ ? view(*sink_indices_) : view(*identity_dims_);  // no sinks: never read
  ops::compact(backend, move,
               {indices, view(*layer.k), view(*layer.v), view(*layer.positions), view(*kept.k), view(*kept.v), view(*kept.positions)});
  cache.replace_storage(layer_index, std::move(kept), kept_slots);
  layer.slots_held = kept_slots;
  middle.compressed = true;
  cache.count_compression();
}

void FourierPolicy::compress_middle(Backend& backend, uint32_t layer, bool keys, Tensor& rows, uint32_t slot_stride, uint32_t length) {
  MiddlePart& part = keys ? layers_[layer].key : layers_[layer].value;
  const uint32_t heads = config_.num_kv_heads, dim = config_.head_dim, rows_2n = 2 * num_states_;
  // Every dim is projected and fitted (sec. 3.4 ranks them all), then the chosen ones are
  // gathered: the coefficients, their affine maps, and the other dims' rows.
  const ops::HippoFourierShape all_dims = compression_shape(length);
  const ops::HippoFourierSegment segment{slot_stride, sinks_, length, 0};
  const std::vector<float> zeros(size_t(heads) * rows_2n * dim, 0.0f);
  Tensor& all_coefficients = ensure(all_coefficients_, backend, zeros.size() * 4);
  Tensor& all_affine = ensure(all_affine_, backend, size_t(heads) * 2 * dim * 4);
  Tensor& squared_error = ensure(squared_error_, backend, size_t(heads) * dim * 4);
  backend.upload(zeros.data(), zeros.size() * 4, all_coefficients, 0);
  ops::hippo_fourier_project(backend, all_dims, segment, {view(rows), view(*identity_dims_), view(all_coefficients), view(*bins_)});
  ops::hippo_fourier_fit(backend, all_dims, segment,
                         {view(rows), view(*identity_dims_), view(all_coefficients), view(all_affine), view(squared_error)});
  if (!part.caller_dims) {
    ops::HippoFourierShape choose = all_dims;
    choose.num_dims = part.compressed;
    ops::hippo_fourier_choose_dims(backend, choose, {view(squared_error), view(ensure(part.chosen_dims, backend, size_t(heads) * dim * 4))});
  }
  const uint32_t kept = dim - part.compressed;
  ensure(part.coefficients, backend, size_t(heads) * rows_2n * part.compressed * 4);
  ensure(part.affine, backend, size_t(heads) * 2 * part.compressed * 4);
  ensure(part.packed, backend, size_t(heads) * kept * packed_stride() * dtype_size(config_.dtype));
  const View dims = view(part.dims());
  ops::gather_dims(backend, {heads, dim, rows_2n, 0, rows_2n, dim, 0, part.compressed, rows_2n, 0, Dtype::F32, Dtype::F32},
                   {view(all_coefficients), dims, view(*part.coefficients)});
  ops::gather_dims(backend, {heads, dim, 2, 0, 2, dim, 0, part.compressed, 2, 0, Dtype::F32, Dtype::F32},
                   {view(all_affine), dims, view(*part.affine)});
  ops::gather_dims(backend,
                   {heads, dim, slot_stride, sinks_, length, dim, part.compressed, kept, packed_stride(), 0, config_.dtype, config_.dtype, true},
                   {view(rows), dims, view(*part.packed)});
}

// Sec. 3.4 ranks every dim of the prompt's middle: projection and fit of all head dims. The
// transform route costs O(T log T) per dim where direct sums cost O(N L), but its rounding is
// relative to a whole spectrum's norm, not to each coefficient (up to 2e-5 of the values apart
// from the CPU's reconstruction on short test prompts, against 7e-7 direct): it takes the
// prompts where direct sums would cost more than a few transforms.
ops::HippoFourierShape FourierPolicy::compression_shape(uint32_t middle_length) const {
  const double direct = double(middle_length) * num_states_, transform = 4.0 * window_length_ * std::log2(double(window_length_));
  return {config_.num_kv_heads, config_.head_dim, num_states_, window_length_, config_.head_dim, config_.dtype,
          direct > transform ? ops::HippoFourierRoute::Transform : ops::HippoFourierRoute::Direct};
}

void FourierPolicy::fold(Cache& cache, uint32_t layer_index, uint32_t first_ring, uint32_t length, uint32_t middle_index) const {
  const LayerState& layer = cache.layer(layer_index);
  const LayerMiddle& middle = layers_[layer_index];
  const ops::FourierFoldShape shape{config_.num_kv_heads, config_.head_dim,     num_states_,          window_length_,
                                    middle.key.compressed, middle.value.compressed, layer.slot_stride, sinks_ + first_ring,
                                    length,                middle_index,           packed_stride(),    config_.dtype};
  ops::fourier_fold(cache.backend(), shape,
                    {view(*layer.k), view(*layer.v), view(middle.key.dims()), view(middle.value.dims()),
                     view(*middle.key.coefficients), view(*middle.value.coefficients), view(*middle.key.packed),
                     view(*middle.value.packed)});
}

AppendPlacement FourierPolicy::place_append(Cache& cache, uint32_t layer_index, uint32_t n_tokens) {
  const LayerMiddle& middle = layers_[layer_index];
  if (!middle.compressed) return Policy::place_append(cache, layer_index, n_tokens);
  // The window's n oldest tokens join the middle (eq. 6) before the new ones take their slots.
  const uint32_t first_run = std::min(n_tokens, local_window_ - middle.ring_start);
  fold(cache, layer_index, middle.ring_start, first_run, middle.middle_length);
  if (n_tokens > first_run) fold(cache, layer_index, 0, n_tokens - first_run, middle.middle_length + first_run);
  AppendPlacement placement;
  placement.first_slot = sinks_ + middle.ring_start;
  placement.wrap_after = local_window_ - middle.ring_start;
  placement.wrap_slot = sinks_;
  return placement;
}

void FourierPolicy::appended(Cache&, uint32_t layer_index, uint32_t n_tokens) {
  LayerMiddle& middle = layers_[layer_index];
  if (!middle.compressed) return;
  middle.middle_length += n_tokens;
  middle.ring_start = (middle.ring_start + n_tokens) % local_window_;
}

void FourierPolicy::check_attend(const Cache&, uint32_t layer_index, uint32_t n_queries, bool with_scores) const {
  if (!layers_[layer_index].compressed) return;
  require(!with_scores, KVC_ERROR_UNSUPPORTED,
          "FOURIER holds the middle's compressed dims as Fourier coefficients, which have no per-slot scores: attend without "
          "scores once a layer is compressed");
  require(n_queries == 1, KVC_ERROR_UNSUPPORTED, [&] {
    return std::to_string(n_queries) + " queries on compressed layer " + std::to_string(layer_index) +
           "; FOURIER's decode attention takes one query (a decode step) once a layer is compressed";
  });
}

bool FourierPolicy::record_attention(Cache& cache, uint32_t layer_index, uint32_t, View q, View out, const StepScores&) {
  const LayerMiddle& middle = layers_[layer_index];
  if (!middle.compressed) return false;
  const LayerState& layer = cache.layer(layer_index);
  ops::FourierAttentionShape shape;
  shape.num_q_heads = config_.num_q_heads;
  shape.num_kv_heads = config_.num_kv_heads;
  shape.head_dim = config_.head_dim;
  shape.num_full_slots = layer.slots_held;
  shape.slot_stride = layer.slot_stride;
  shape.num_middle = middle.middle_length;
  shape.middle_stride = packed_stride();
  shape.num_states = num_states_;
  shape.window_length = window_length_;
  shape.k_compressed = middle.key.compressed;
  shape.v_compressed = middle.value.compressed;
  shape.dtype = config_.dtype;
  ops::fourier_attention(cache.backend(), shape,
                         {q, view(*layer.k), view(*layer.v), view(*middle.key.packed),
                          view(*middle.value.packed), view(middle.key.dims()), view(middle.value.dims()),
                          view(*middle.key.coefficients), view(*middle.value.coefficients), view(*middle.key.affine),
                          view(*middle.value.affine), out});
  return true;
}

uint32_t FourierPolicy::read_slots(const Cache& cache, uint32_t layer) const {
  const LayerMiddle& middle = layers_[layer];
  return middle.compressed ? sinks_ + middle.middle_length + local_window_ : cache.layer(layer).slots_held;
}

bool FourierPolicy::read(Cache& cache, uint32_t layer_index, void* k, void* v, int32_t* positions) {
  const LayerMiddle& middle = layers_[layer_index];
  if (!middle.compressed) return false;
  Backend& backend = cache.backend();
  const LayerState& layer = cache.layer(layer_index);
  const uint32_t heads = config_.num_kv_heads, dim = config_.head_dim, length = middle.middle_length;
  const size_t stored = size_t(heads) * layer.slot_stride, row_bytes = size_t(dim) * dtype_size(config_.dtype);
  std::vector<unsigned char> held_k(stored * row_bytes), held_v(stored * row_bytes);
  std::vector<int32_t> held_positions(stored);
  struct HostPart {
    std::vector<uint32_t> dims;
    std::vector<float> coefficients, affine, packed;
  } key, value;
  backend.begin();
  backend.download(*layer.k, 0, held_k.data(), held_k.size());
  backend.download(*layer.v, 0, held_v.data(), held_v.size());
  backend.download(*layer.positions, 0, held_positions.data(), held_positions.size() * 4);
  std::vector<std::vector<unsigned char>> packed_bytes(2);
  for (auto [host, part, bytes] : {std::tuple{&key, &middle.key, &packed_bytes[0]}, std::tuple{&value, &middle.value, &packed_bytes[1]}}) {
    host->dims.resize(size_t(heads) * dim);
    host->coefficients.resize(part->coefficients->bytes() / 4);
    host->affine.resize(part->affine->bytes() / 4);
    bytes->resize(part->packed->bytes());
    backend.download(part->dims(), 0, host->dims.data(), host->dims.size() * 4);
    backend.download(*part->coefficients, 0, host->coefficients.data(), host->coefficients.size() * 4);
    backend.download(*part->affine, 0, host->affine.data(), host->affine.size() * 4);
    backend.download(*part->packed, 0, bytes->data(), bytes->size());
  }
  backend.submit();

  // Per kv head: the sinks, the middle rebuilt in token order, then the window from its oldest.
  const uint32_t slots = read_slots(cache, layer_index);
  for (auto [host, part, bytes, out] : {std::tuple{&key, &middle.key, &packed_bytes[0], k}, std::tuple{&value, &middle.value, &packed_bytes[1], v}}) {
    if (!out) continue;
    const ops::HippoFourierShape shape{heads, dim, num_states_, window_length_, part->compressed, Dtype::F32};
    const std::vector<float> rebuilt =
        ops::hippo_fourier_reconstruct_host(shape, length, 0, host->coefficients.data(), host->affine.data());
    const uint32_t kept = dim - part->compressed;
    for (uint32_t head = 0; head < heads; ++head) {
      const uint32_t* head_dims = host->dims.data() + size_t(head) * dim;
      for (uint32_t t = 0; t < length; ++t) {
        const size_t out_row = size_t(head) * slots + sinks_ + t;
        for (uint32_t j = 0; j < part->compressed; ++j)
          store_element(out, config_.dtype, out_row * dim + head_dims[j], rebuilt[(size_t(head) * length + t) * part->compressed + j]);
        for (uint32_t u = 0; u < kept; ++u)
          store_element(out, config_.dtype, out_row * dim + head_dims[part->compressed + u],
                        load_element(bytes->data(), config_.dtype, (size_t(head) * kept + u) * packed_stride() + t));
      }
    }
  }
  for (uint32_t head = 0; head < heads; ++head)
    for (uint32_t out_slot = 0; out_slot < slots; ++out_slot) {
      const size_t out_row = size_t(head) * slots + out_slot;
      if (out_slot >= sinks_ && out_slot < sinks_ + length) {
        if (positions) positions[out_row] = int32_t(out_slot);
        continue;
      }
      const uint32_t slot = out_slot < sinks_ ? out_slot : sinks_ + (middle.ring_start + out_slot - sinks_ - length) % local_window_;
      const size_t from = size_t(head) * layer.slot_stride + slot;
      if (k) std::memcpy(static_cast<unsigned char*>(k) + out_row * row_bytes, held_k.data() + from * row_bytes, row_bytes);
      if (v) std::memcpy(static_cast<unsigned char*>(v) + out_row * row_bytes, held_v.data() + from * row_bytes, row_bytes);
      if (positions) positions[out_row] = held_positions[from];
    }
  return true;
}

size_t FourierPolicy::device_bytes_held() const {
  size_t total = 0;
  for (const std::shared_ptr<Tensor>* tensor : {&identity_dims_, &sink_indices_, &bins_, &all_coefficients_, &all_affine_, &squared_error_})
    total += *tensor ? (*tensor)->bytes() : 0;
  for (const LayerMiddle& middle : layers_)
    for (const MiddlePart* part : {&middle.key, &middle.value})
      for (const std::shared_ptr<Tensor>* tensor : {&part->caller_dims, &part->chosen_dims, &part->coefficients, &part->affine, &part->packed})
        total += *tensor ? (*tensor)->bytes() : 0;
  return total;
}

void FourierPolicy::on_reset() {
  prefill_ended_ = false;
  all_coefficients_.reset();
  all_affine_.reset();
  squared_error_.reset();
  for (LayerMiddle& middle : layers_) {
    middle.compressed = false;
    middle.middle_length = 0;
    middle.ring_start = 0;
    for (MiddlePart* part : {&middle.key, &middle.value}) {
      part->chosen_dims.reset();
      part->coefficients.reset();
      part->affine.reset();
      part->packed.reset();
    }
  }
}

}  // namespace kvc
