#include "policies/freqkv.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "cache/cache.h"
#include "ops/frequency_compress.h"

namespace kvc {
namespace {

// Windows the FFT route cannot hold in shared memory take the dense route, whose f32 table of
// L x M entries is 512 MiB at this window with gamma near 1 (ops/frequency_compress.h).
constexpr uint32_t kMaxWindow = 16384;

uint32_t retained_for(uint32_t compressed_slots, float retain_ratio) {
  return static_cast<uint32_t>(std::floor(static_cast<double>(retain_ratio) * compressed_slots));
}

}  // namespace

kvc_freqkv_params freqkv_params(const CacheConfig& config) {
  kvc_freqkv_params params = kvc_freqkv_params_default();
  if (config.policy_params) {
    const auto* given = static_cast<const kvc_freqkv_params*>(config.policy_params);
    // The first struct ended before recent_tokens: such a caller gets the paper's 0.
    const size_t first_version_size = offsetof(kvc_freqkv_params, recent_tokens);
    require(given->struct_size == first_version_size || given->struct_size >= sizeof(kvc_freqkv_params), KVC_ERROR_INVALID_ARGUMENT,
            "kvc_freqkv_params.struct_size is " + std::to_string(given->struct_size) + "; set it to sizeof(kvc_freqkv_params)");
    std::memcpy(&params, given, std::min<size_t>(given->struct_size, sizeof(params)));
  }
  const uint32_t window = config.capacity;
  require(window <= kMaxWindow, KVC_ERROR_INVALID_ARGUMENT,
          "capacity (the FreqKV window N) is " + std::to_string(window) + "; FREQKV allows at most " +
              std::to_string(kMaxWindow) + " (its transform table grows as N^2)");
  require(std::isfinite(params.retain_ratio) && params.retain_ratio > 0.0f && params.retain_ratio < 1.0f,
          KVC_ERROR_INVALID_ARGUMENT,
          "kvc_freqkv_params.retain_ratio is " + std::to_string(params.retain_ratio) + "; it must lie strictly between 0 and 1");
  require(params.sink_tokens < window, KVC_ERROR_INVALID_ARGUMENT,
          "kvc_freqkv_params.sink_tokens is " + std::to_string(params.sink_tokens) + "; it must be below capacity (" +
              std::to_string(window) + ")");
  const uint64_t kept_whole = uint64_t(params.sink_tokens) + params.recent_tokens;
  require(kept_whole < window, KVC_ERROR_INVALID_ARGUMENT,
          "kvc_freqkv_params.recent_tokens is " + std::to_string(params.recent_tokens) + "; sink_tokens + recent_tokens (" +
              std::to_string(kept_whole) + ") must be below capacity (" + std::to_string(window) + ")");
  const uint32_t compressed = window - static_cast<uint32_t>(kept_whole);
  require(retained_for(compressed, params.retain_ratio) >= 1, KVC_ERROR_INVALID_ARGUMENT,
          "capacity - sink_tokens - recent_tokens = " + std::to_string(compressed) +
              " slots are too few to compress with retain_ratio " + std::to_string(params.retain_ratio) +
              ": floor(retain_ratio * (capacity - sink_tokens - recent_tokens)) must be at least 1");
  return params;
}

FreqKvPolicy::FreqKvPolicy(const CacheConfig& config, const kvc_freqkv_params& params)
    : window_(config.capacity),
      sink_slots_(params.sink_tokens),
      recent_slots_(params.recent_tokens),
      retained_slots_(retained_for(config.capacity - params.sink_tokens - params.recent_tokens, params.retain_ratio)),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      dtype_(config.dtype) {}

void FreqKvPolicy::check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const {
  const uint32_t held = cache.layer(layer).slots_held;
  require(uint64_t(held) + n_tokens <= window_, KVC_ERROR_CAPACITY,
          [&] { return "layer " + std::to_string(layer) + " holds " + std::to_string(held) + " of its " + std::to_string(window_) +
              "-slot FreqKV window; " + std::to_string(n_tokens) + " more do not fit: append at most " +
              std::to_string(window_ - held) + " now (a full layer compresses after its next kvc_attend)"; });
}

int32_t FreqKvPolicy::position_for_slot(const Cache&, uint32_t, uint32_t slot, uint64_t) const {
  return static_cast<int32_t>(slot);
}

ops::FrequencyCompressShape FreqKvPolicy::compress_shape(uint32_t slot_stride) const {
  ops::FrequencyCompressShape shape;
  shape.num_heads = num_kv_heads_;
  shape.head_dim = head_dim_;
  shape.in_length = compressed_slots();
  shape.out_length = retained_slots_;
  shape.head_stride = slot_stride;
  shape.dtype = dtype_;
  shape.recent_length = recent_slots_;
  return shape;
}

void FreqKvPolicy::allocate_device_state(Backend& backend) {
  backend_ = &backend;
  // The op's tables depend on (N - S, L) only: the head stride does not matter here.
  ops::frequency_compress_prepare(backend, compress_shape(window_));
}

void FreqKvPolicy::compress(Tensor& states, uint32_t slot_stride) {
  require(backend_ != nullptr, KVC_ERROR_INTERNAL, "FreqKvPolicy::compress before allocate_device_state");
  const size_t row_bytes = size_t(head_dim_) * dtype_size(dtype_);
  // The op moves the recent rows up behind the compressed ones.
  ops::frequency_compress(*backend_, compress_shape(slot_stride), {View{&states, sink_slots_ * row_bytes}});
}

void FreqKvPolicy::after_attend(Cache& cache, uint32_t layer_index, const StepScores&) {
  LayerState& layer = cache.layer(layer_index);
  if (layer.slots_held < window_) return;
  compress(*layer.k, layer.slot_stride);
  compress(*layer.v, layer.slot_stride);
  // Every slot keeps the position it had, its index in the cache: the recent tokens take
  // the positions of the slots they moved to.
  layer.slots_held = sink_slots_ + retained_slots_ + recent_slots_;
  layer.last_append = 0;  // the chunk's slots were folded in: attending from them again is refused
  cache.count_compression();
}

}  // namespace kvc
