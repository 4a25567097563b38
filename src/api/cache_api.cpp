// kvc_cache_* and kvc_attend: argument checks at the boundary, then the Cache does the work.
#include <cstddef>

#include "api/buffer_view.h"
#include "api/handles.h"
#include "policies/faedkv.h"
#include "policies/observation_window.h"

using kvc::api::guarded;

namespace {

// Runs `body` on a cache, reporting failures on its context.
template <typename Body>
kvc_status with_cache(const kvc_cache* cache, Body&& body) {
  if (!cache) return KVC_ERROR_NULL_POINTER;
  return guarded(cache->context, nullptr, [&] { body(*cache->cache); });
}

void require_dtype(const kvc::Cache& cache, kvc_dtype dtype) {
  const kvc::Dtype stored = cache.config().dtype;
  kvc::require(static_cast<uint32_t>(dtype) == static_cast<uint32_t>(stored), KVC_ERROR_DTYPE_MISMATCH,
               [&] { return std::string("data passed as ") + (dtype == KVC_DTYPE_F16 ? "f16" : dtype == KVC_DTYPE_F32 ? "f32" : "an unknown dtype") +
                   ", but the cache stores " + kvc::dtype_name(stored); });
}

}  // namespace

extern "C" {

kvc_cache_desc kvc_cache_desc_default(void) {
  kvc_cache_desc desc{};
  desc.struct_size = sizeof(kvc_cache_desc);
  desc.dtype = KVC_DTYPE_F32;
  desc.policy = KVC_POLICY_FULL;
  desc.rope_style = KVC_ROPE_NONE;
  desc.rope_theta = 10000.0f;
  return desc;
}

kvc_eviction_params kvc_eviction_params_default(void) {
  kvc_eviction_params params{};
  params.struct_size = sizeof(kvc_eviction_params);
  params.sinks = 4;  // StreamingLLM §3.2's four attention sinks, also TreeKV §5.2's setting
  params.recent_window = KVC_RECENT_WINDOW_DEFAULT;
  params.chunk_slots = 1;
  // TreeKV §4.2 scores blocks with the prompt's last block as observation window "following
  // SnapKV", whose window is 32 tokens; TreeKV states no b, so the blocks take that size.
  params.prefill_block = 32;
  return params;
}

kvc_status kvc_cache_create(kvc_context* context, const kvc_cache_desc* desc, kvc_cache** out_cache) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] {
    kvc::require(out_cache != nullptr, KVC_ERROR_NULL_POINTER, "kvc_cache_create: out_cache is NULL");
    const kvc::CacheConfig config = kvc::validate_cache_desc(desc);
    auto cache = std::make_unique<kvc_cache>();
    cache->context = context;
    kvc::api::require_no_step(*context, "kvc_cache_create");
    cache->cache = std::make_unique<kvc::Cache>(*context->backend, config);
    ++context->live_handles;
    *out_cache = cache.release();
  });
}

void kvc_cache_destroy(kvc_cache* cache) {
  if (!cache) return;
  kvc_context* context = cache->context;
  delete cache;
  kvc::api::release_context_reference(context);
}

kvc_status kvc_cache_append(kvc_cache* cache, uint32_t layer, uint32_t n_tokens, kvc_dtype dtype, const void* k, const void* v) {
  return with_cache(cache, [&](kvc::Cache& c) {
    require_dtype(c, dtype);
    c.append_host(layer, n_tokens, k, v);
  });
}

kvc_status kvc_cache_append_device(kvc_cache* cache, uint32_t layer, uint32_t n_tokens, kvc_dtype dtype, kvc_buffer_view k,
                                   kvc_buffer_view v) {
  return with_cache(cache, [&](kvc::Cache& c) {
    require_dtype(c, dtype);
    c.check_append(layer, n_tokens);
    const uint64_t bytes = kvc::size_product({n_tokens, c.config().token_elements(), kvc::dtype_size(c.config().dtype)});
    const kvc::View k_view = kvc::api::device_view(*cache->context, k, bytes, "k");
    const kvc::View v_view = kvc::api::device_view(*cache->context, v, bytes, "v");
    c.append_device(layer, n_tokens, k_view, v_view);
  });
}

kvc_status kvc_attend(kvc_cache* cache, uint32_t layer, uint32_t n_queries, kvc_dtype dtype, const void* q, void* out,
                      float* scores) {
  return with_cache(cache, [&](kvc::Cache& c) {
    require_dtype(c, dtype);
    c.attend_host(layer, n_queries, q, out, scores);
  });
}

kvc_status kvc_attend_device(kvc_cache* cache, uint32_t layer, uint32_t n_queries, kvc_dtype dtype, kvc_buffer_view q,
                             kvc_buffer_view out, kvc_buffer_view scores) {
  return with_cache(cache, [&](kvc::Cache& c) {
    require_dtype(c, dtype);
    c.check_attend(layer, n_queries);
    const uint64_t bytes = kvc::size_product({n_queries, c.config().query_elements(), kvc::dtype_size(c.config().dtype)});
    const kvc::View q_view = kvc::api::device_view(*cache->context, q, bytes, "q");
    const kvc::View out_view = kvc::api::device_view(*cache->context, out, bytes, "out");
    // [num_kv_heads][slots]: per kv head, every slot the layer holds now.
    const uint64_t score_bytes = kvc::size_product({c.config().num_kv_heads, c.layer(layer).slots_held, sizeof(float)});
    const kvc::View scores_view = scores.buffer ? kvc::api::device_view(*cache->context, scores, score_bytes, "scores") : kvc::View{};
    c.attend_device(layer, n_queries, q_view, out_view, scores_view);
  });
}

kvc_status kvc_cache_layer_slots(const kvc_cache* cache, uint32_t layer, uint32_t* out_slots) {
  return with_cache(cache, [&](kvc::Cache& c) {
    kvc::require(out_slots != nullptr, KVC_ERROR_NULL_POINTER, "kvc_cache_layer_slots: out_slots is NULL");
    kvc::require(layer < c.config().num_layers, KVC_ERROR_OUT_OF_RANGE,
                 "layer " + std::to_string(layer) + " is past the cache's " + std::to_string(c.config().num_layers) + " layers");
    *out_slots = c.policy().read_slots(c, layer);
  });
}

kvc_status kvc_cache_read(kvc_cache* cache, uint32_t layer, uint32_t max_slots, kvc_dtype dtype, void* k, void* v,
                          int32_t* positions) {
  return with_cache(cache, [&](kvc::Cache& c) {
    require_dtype(c, dtype);
    kvc::api::require_no_step(*cache->context, "kvc_cache_read");
    c.read(layer, max_slots, k, v, positions);
  });
}

kvc_status kvc_faedkv_ablate(kvc_cache* cache, uint32_t layer, const kvc_faedkv_params* params, uint32_t pruned_chunk,
                             uint32_t max_slots, kvc_dtype dtype, void* k, void* v) {
  return with_cache(cache, [&](kvc::Cache& c) {
    require_dtype(c, dtype);
    kvc::api::require_no_step(*cache->context, "kvc_faedkv_ablate");
    kvc::require(layer < c.config().num_layers, KVC_ERROR_OUT_OF_RANGE,
                 "layer " + std::to_string(layer) + " is past the cache's " + std::to_string(c.config().num_layers) + " layers");
    const uint32_t slots = c.layer(layer).slots_held;
    kvc::require(max_slots >= slots, KVC_ERROR_BUFFER_TOO_SMALL,
                 "max_slots is " + std::to_string(max_slots) + " but layer " + std::to_string(layer) + " holds " + std::to_string(slots));
    kvc_faedkv_params given = kvc_faedkv_params_default();
    if (params) {
      kvc::api::require_struct_size(params->struct_size, sizeof(kvc_faedkv_params), "kvc_faedkv_params");
      given = *params;
    }
    kvc::faedkv_ablate(c, layer, given, pruned_chunk, k, v);
  });
}

kvc_status kvc_cache_stats_get(const kvc_cache* cache, kvc_cache_stats* stats) {
  return with_cache(cache, [&](kvc::Cache& c) {
    kvc::require(stats != nullptr, KVC_ERROR_NULL_POINTER, "kvc_cache_stats_get: stats is NULL");
    kvc::api::require_struct_size(stats->struct_size, sizeof(kvc_cache_stats), "kvc_cache_stats");
    kvc_cache_stats result{};
    result.struct_size = stats->struct_size;
    for (uint32_t layer = 0; layer < c.config().num_layers; ++layer) {
      result.tokens_seen += c.layer(layer).tokens_seen;
      result.slots_held += c.layer(layer).slots_held;
    }
    result.device_bytes_held = c.device_bytes_held();
    result.bytes_per_slot = c.bytes_per_slot();
    result.compressions = c.compressions();
    *stats = result;
  });
}

kvc_window_policy_params kvc_window_policy_params_default(void) { return kvc::window_policy_defaults(); }

kvc_status kvc_cache_end_prefill(kvc_cache* cache) {
  return with_cache(cache, [&](kvc::Cache& c) { c.end_prefill(); });
}

kvc_status kvc_cache_reset(kvc_cache* cache) {
  return with_cache(cache, [&](kvc::Cache& c) {
    kvc::api::require_no_step(*cache->context, "kvc_cache_reset");
    c.reset();
  });
}

}  // extern "C"
