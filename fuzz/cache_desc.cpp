#include "cache_desc.h"

#include <algorithm>
#include <cstddef>

#include "picks.h"

namespace kvc::fuzz {
namespace {

constexpr size_t kMaxTableEntries = size_t(1) << 16;
constexpr uint32_t kMaxCapacity = 1u << 28;       // kvc_cache_desc.capacity's limit
constexpr uint32_t kMaxChunkSlots = 1u << 24;     // kvc_eviction_params.chunk_slots' limit

std::vector<uint8_t> consume_flags(FuzzedDataProvider& data, size_t count) {
  std::vector<uint8_t> flags = data.ConsumeBytes<uint8_t>(count);
  flags.resize(count, 1);  // input ran out: keep every chunk or dim
  return flags;
}

std::vector<float> consume_floats(FuzzedDataProvider& data, size_t count, std::initializer_list<float> typical) {
  std::vector<float> values(count);
  for (float& value : values) value = pick_float(data, typical);
  return values;
}

}  // namespace

FuzzedCacheDesc::FuzzedCacheDesc(FuzzedDataProvider& data) : desc_(kvc_cache_desc_default()) {
  decode_shape(data);
  if (pick_rarely(data, 4)) return;  // NULL policy_params: the policy's defaults
  switch (desc_.policy) {
    case KVC_POLICY_STREAMING:
    case KVC_POLICY_H2O:
    case KVC_POLICY_TOVA:
    case KVC_POLICY_TREEKV: decode_eviction(data); break;
    case KVC_POLICY_SNAPKV:
    case KVC_POLICY_PYRAMIDKV:
    case KVC_POLICY_HITKV:
    case KVC_POLICY_PHITKV: decode_window(data); break;
    case KVC_POLICY_FREQKV: decode_freqkv(data); break;
    case KVC_POLICY_FAEDKV: decode_faedkv(data); break;
    case KVC_POLICY_FOURIER: decode_fourier(data); break;
    default: break;  // FULL takes none; an unknown policy must be refused whatever it is given
  }
}

void FuzzedCacheDesc::decode_shape(FuzzedDataProvider& data) {
  if (pick_rarely(data, 16))  // 0.1's descriptor ended before policy_params; 8 bytes ends before the shape
    desc_.struct_size = pick_rarely(data, 2) ? 8 : uint32_t(offsetof(kvc_cache_desc, policy_params));
  desc_.num_layers = pick_count(data, 1, 3, {0, 4097});
  desc_.num_kv_heads = pick_count(data, 1, 2, {0, 1025});
  desc_.num_q_heads = desc_.num_kv_heads * pick_count(data, 1, 3, {0, 65536});
  if (pick_rarely(data, 16)) desc_.num_q_heads += 1;  // not a multiple of num_kv_heads
  desc_.head_dim = 8 * pick_count(data, 1, 3, {0, 32, 33}) + (pick_rarely(data, 16) ? 4 : 0);
  desc_.dtype = static_cast<kvc_dtype>(pick_count(data, 0, 1, {2, 0x7fffffff}));
  desc_.capacity = pick_count(data, 2, 64, {0, 1, kMaxCapacity + 1, UINT32_MAX});
  desc_.policy = static_cast<kvc_policy>(pick_count(data, 0, 11, {12, 0x7fffffff}));
  // FAEDKV and FOURIER refuse libkvc's RoPE: half the caches go without it
  desc_.rope_style = pick_rarely(data, 2) ? KVC_ROPE_NONE : static_cast<kvc_rope_style>(pick_count(data, 0, 2, {3}));
  desc_.rope_theta = pick_float(data, {10000.0f, 500000.0f, 2.0f});
  desc_.rope_dims = 8 * pick_count(data, 0, 3, {33}) + (pick_rarely(data, 16) ? 4 : 0);
}

uint32_t FuzzedCacheDesc::decode_struct_size(FuzzedDataProvider& data, uint32_t full_size) {
  return pick_rarely(data, 16) ? pick_count(data, 0, full_size - 1, {}) : full_size;
}

bool FuzzedCacheDesc::table_fits(size_t entries) const { return entries > 0 && entries <= kMaxTableEntries; }

void FuzzedCacheDesc::decode_eviction(FuzzedDataProvider& data) {
  const uint32_t capacity = desc_.capacity;
  eviction_ = kvc_eviction_params_default();
  eviction_.struct_size = decode_struct_size(data, sizeof(eviction_));
  eviction_.sinks = pick_count(data, 0, capacity / 4, {UINT32_MAX});
  eviction_.recent_window = pick_rarely(data, 2) ? KVC_RECENT_WINDOW_DEFAULT : pick_count(data, 0, capacity / 2, {UINT32_MAX - 1});
  eviction_.chunk_slots = pick_count(data, 1, 16, {0, kMaxChunkSlots + 1});
  eviction_.prefill_block = pick_count(data, 1, 8, {0, kMaxChunkSlots + 1});
  eviction_.select_left_token = pick_count(data, 0, 1, {2});
  if (pick_rarely(data, 4) && table_fits(desc_.num_layers)) {
    layer_sizes_.resize(desc_.num_layers);
    for (uint32_t& size : layer_sizes_) size = pick_count(data, 1, capacity + 8, {0, kMaxCapacity + 1});
    eviction_.layer_capacities = layer_sizes_.data();
  }
  desc_.policy_params = &eviction_;
}

void FuzzedCacheDesc::decode_window(FuzzedDataProvider& data) {
  const uint32_t capacity = desc_.capacity;
  window_ = kvc_window_policy_params_default();
  window_.struct_size = pick_rarely(data, 8) ? uint32_t(offsetof(kvc_window_policy_params, decode_slots))  // 0.1's struct
                                             : decode_struct_size(data, sizeof(window_));
  window_.window = pick_count(data, 1, std::min(capacity - 1, 16u), {0, capacity, UINT32_MAX});
  window_.budget = pick_count(data, window_.window + 1, capacity, {window_.window, capacity + 1, UINT32_MAX});
  window_.pool_kernel = 2 * pick_count(data, 0, 4, {}) + 1 - (pick_rarely(data, 16) ? 1 : 0);
  window_.hit_k = pick_count(data, 0, capacity, {capacity + 1, UINT32_MAX});
  window_.hit_threshold = pick_float(data, {0.0f, 0.25f, 0.5f, 1.0f});
  window_.pyramid_beta = pick_float(data, {1.0f, 2.0f, 20.0f});
  window_.decode_slots = pick_count(data, 0, capacity, {UINT32_MAX});
  if (pick_rarely(data, 4)) {
    // kvc.h: num_layer_budgets entries, which must equal num_layers; now and then they differ
    const uint32_t entries = desc_.num_layers + (pick_rarely(data, 8) ? 1 : 0) - (pick_rarely(data, 8) ? 1 : 0);
    if (table_fits(entries)) {
      layer_sizes_.resize(entries);
      for (uint32_t& budget : layer_sizes_) budget = pick_count(data, window_.window + 1, capacity, {0, capacity + 1, UINT32_MAX});
      window_.layer_budgets = layer_sizes_.data();
      window_.num_layer_budgets = entries;
    }
  }
  desc_.policy_params = &window_;
}

void FuzzedCacheDesc::decode_freqkv(FuzzedDataProvider& data) {
  const uint32_t capacity = desc_.capacity;
  freqkv_ = kvc_freqkv_params_default();
  freqkv_.struct_size = pick_rarely(data, 8) ? uint32_t(offsetof(kvc_freqkv_params, recent_tokens))  // before recent_tokens
                                             : decode_struct_size(data, sizeof(freqkv_));
  freqkv_.sink_tokens = pick_count(data, 0, capacity / 4, {capacity, UINT32_MAX});
  freqkv_.retain_ratio = pick_float(data, {0.25f, 0.5f, 0.75f, 0.99f});
  freqkv_.recent_tokens = pick_count(data, 0, capacity / 4, {capacity, UINT32_MAX});
  desc_.policy_params = &freqkv_;
}

void FuzzedCacheDesc::decode_faedkv(FuzzedDataProvider& data) {
  faedkv_ = kvc_faedkv_params_default();
  faedkv_.struct_size = decode_struct_size(data, sizeof(faedkv_));
  faedkv_.sinks = pick_count(data, 0, desc_.capacity / 4, {UINT32_MAX});
  faedkv_.recent_window = pick_count(data, 1, std::max(desc_.capacity / 4, 1u), {0, UINT32_MAX});
  faedkv_.chunks = pick_count(data, 1, 4, {0, 4097});
  faedkv_.retain_ratio = pick_float(data, {0.125f, 0.5f, 1.0f});
  const size_t entries = size_t(desc_.num_layers) * faedkv_.chunks;  // [num_layers][chunks]
  if (pick_rarely(data, 4) && table_fits(entries)) {
    key_floats_ = consume_floats(data, entries, {0.0f, 1.0f, 2.5f, -3.0f});
    faedkv_.chunk_importance = key_floats_.data();
  }
  if (pick_rarely(data, 4) && table_fits(entries)) {
    key_flags_ = consume_flags(data, entries);
    faedkv_.chunk_keep = key_flags_.data();
  }
  desc_.policy_params = &faedkv_;
}

void FuzzedCacheDesc::decode_fourier(FuzzedDataProvider& data) {
  fourier_ = kvc_fourier_params_default();
  fourier_.struct_size = decode_struct_size(data, sizeof(fourier_));
  fourier_.sinks = pick_count(data, 0, desc_.capacity / 4, {UINT32_MAX});
  fourier_.local_window = pick_count(data, 1, std::max(desc_.capacity / 4, 1u), {0, UINT32_MAX});
  fourier_.num_states = pick_count(data, 1, 4, {0, 65536});
  // 0 means capacity; else at least capacity, which covers the middle and 2 num_states
  fourier_.window_length = pick_rarely(data, 2) ? 0 : pick_count(data, desc_.capacity, 2 * desc_.capacity, {1, (1u << 24) + 1, UINT32_MAX});
  const size_t layers = desc_.num_layers;
  if (pick_rarely(data, 4) && table_fits(layers)) {
    key_floats_ = consume_floats(data, layers, {0.25f, 0.5f, 0.9f});
    value_floats_ = consume_floats(data, layers, {0.25f, 0.5f, 0.9f});
    fourier_.key_ratios = key_floats_.data();
    fourier_.value_ratios = value_floats_.data();
  }
  const size_t dims = layers * desc_.num_kv_heads * desc_.head_dim;  // [num_layers][num_kv_heads][head_dim]
  if (pick_rarely(data, 4) && table_fits(dims)) {
    key_flags_ = consume_flags(data, dims);
    value_flags_ = consume_flags(data, dims);
    fourier_.key_dims = key_flags_.data();
    fourier_.value_dims = value_flags_.data();
  }
  desc_.policy_params = &fourier_;
}

}  // namespace kvc::fuzz
