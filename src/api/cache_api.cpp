// kvc_cache_* and kvc_attend: argument checks at the boundary, then the Cache does the work.
#include <cstddef>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/buffer_view.h"
#include "api/handles.h"
#include "cache/append_batch.h"
#include "cache/attend_batch.h"
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

// Throws unless caches[index] has caches[0]'s shape: heads, head_dim, dtype and RoPE.
void require_same_shape(const kvc::CacheConfig& first, const kvc::CacheConfig& other, uint32_t index) {
  const auto field = [&](const char* name, uint64_t expected, uint64_t got) {
    kvc::require(expected == got, KVC_ERROR_INVALID_ARGUMENT, [&] {
      return "caches[" + std::to_string(index) + "] has " + name + " " + std::to_string(got) + " but caches[0] has " +
             std::to_string(expected) + ": a batch shares its caches' shape";
    });
  };
  field("num_q_heads", first.num_q_heads, other.num_q_heads);
  field("num_kv_heads", first.num_kv_heads, other.num_kv_heads);
  field("head_dim", first.head_dim, other.head_dim);
  field("dtype", static_cast<uint64_t>(first.dtype), static_cast<uint64_t>(other.dtype));
  kvc::require(first.rope == other.rope, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return "caches[" + std::to_string(index) + "] has other RoPE settings (style, rotary dims, theta) than caches[0]";
  });
}

// `body`'s failure with "caches[index]: " before its message.
template <typename Body>
void for_cache(uint32_t index, Body&& body) {
  try {
    body();
  } catch (const kvc::Error& error) {
    throw kvc::Error(error.status(), "caches[" + std::to_string(index) + "]: " + error.what());
  }
}

// The checks every batched call runs on its caches list first: n_caches from 1 to `max_caches`
// and no NULL array among `arrays` (named in `arrays_named`).
void require_batch(const char* call, uint32_t n_caches, uint32_t max_caches, std::initializer_list<const void*> arrays,
                   const char* arrays_named) {
  kvc::require(n_caches >= 1 && n_caches <= max_caches, KVC_ERROR_INVALID_ARGUMENT, [&] {
    return std::string(call) + ": n_caches is " + std::to_string(n_caches) + "; it must be 1 to " + std::to_string(max_caches);
  });
  for (const void* array : arrays)
    kvc::require(array != nullptr, KVC_ERROR_NULL_POINTER, [&] { return std::string(call) + ": " + arrays_named + " is NULL"; });
}

// caches[index] of a batched call on `context`, checked: not NULL, of the context, listed once
// (`listed` maps each cache seen to its first index), and caches[0]'s dtype (for index 0: the
// call's) and shape.
kvc::Cache& batch_member(const kvc_context* context, kvc_cache* const* caches, uint32_t index, kvc_dtype dtype,
                         std::unordered_map<const kvc_cache*, uint32_t>& listed, const char* once_reason) {
  const kvc_cache* handle = caches[index];
  const std::string name = "caches[" + std::to_string(index) + "]";
  kvc::require(handle != nullptr, KVC_ERROR_NULL_POINTER, [&] { return name + " is NULL"; });
  kvc::require(handle->context == context, KVC_ERROR_INVALID_ARGUMENT, [&] { return name + " belongs to another context"; });
  const auto placed = listed.emplace(handle, index);  // no structured binding: C++17 lambdas cannot capture one
  kvc::require(placed.second, KVC_ERROR_INVALID_ARGUMENT,
               [&] { return name + " is caches[" + std::to_string(placed.first->second) + "] again: " + once_reason; });
  kvc::Cache& cache = *handle->cache;
  for_cache(index, [&] {
    if (index == 0) require_dtype(cache, dtype);
    else require_same_shape(caches[0]->cache->config(), cache.config(), index);
  });
  return cache;
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
    c.check_attend(layer, n_queries, scores.buffer != nullptr);
    const uint64_t bytes = kvc::size_product({n_queries, c.config().query_elements(), kvc::dtype_size(c.config().dtype)});
    const kvc::View q_view = kvc::api::device_view(*cache->context, q, bytes, "q");
    const kvc::View out_view = kvc::api::device_view(*cache->context, out, bytes, "out");
    // [num_kv_heads][slots]: per kv head, every slot the layer holds now.
    const uint64_t score_bytes = kvc::size_product({c.config().num_kv_heads, c.layer(layer).slots_held, sizeof(float)});
    const kvc::View scores_view = scores.buffer ? kvc::api::device_view(*cache->context, scores, score_bytes, "scores") : kvc::View{};
    c.attend_device(layer, n_queries, q_view, out_view, scores_view);
  });
}

kvc_status kvc_decode_device(kvc_cache* cache, uint32_t layer, kvc_dtype dtype, kvc_buffer_view k, kvc_buffer_view v,
                             kvc_buffer_view q, kvc_buffer_view out) {
  return with_cache(cache, [&](kvc::Cache& c) {
    require_dtype(c, dtype);
    c.check_decode(layer);
    const size_t element = kvc::dtype_size(c.config().dtype);
    const uint64_t token_bytes = kvc::size_product({c.config().token_elements(), element});
    const uint64_t query_bytes = kvc::size_product({c.config().query_elements(), element});
    const kvc::View k_view = kvc::api::device_view(*cache->context, k, token_bytes, "k");
    const kvc::View v_view = kvc::api::device_view(*cache->context, v, token_bytes, "v");
    const kvc::View q_view = kvc::api::device_view(*cache->context, q, query_bytes, "q");
    const kvc::View out_view = kvc::api::device_view(*cache->context, out, query_bytes, "out");
    c.decode_device(layer, k_view, v_view, q_view, out_view);
  });
}

kvc_status kvc_attend_batch_device(kvc_context* context, uint32_t n_caches, kvc_cache* const* caches, uint32_t layer,
                                   kvc_dtype dtype, const kvc_buffer_view* q, const kvc_buffer_view* out,
                                   const kvc_buffer_view* scores) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] {
    require_batch("kvc_attend_batch_device", n_caches, KVC_ATTEND_BATCH_MAX_CACHES, {caches, q, out}, "caches, q or out");
    std::vector<kvc::DecodeCall> calls(n_caches);
    std::unordered_map<const kvc_cache*, uint32_t> listed;
    for (uint32_t i = 0; i < n_caches; ++i) {
      kvc::Cache& cache = batch_member(context, caches, i, dtype, listed, "each cache decodes once per call");
      for_cache(i, [&] { cache.check_attend(layer, 1, scores && scores[i].buffer); });
      const std::string name = "[" + std::to_string(i) + "]";
      const uint64_t bytes = kvc::size_product({cache.config().query_elements(), kvc::dtype_size(cache.config().dtype)});
      calls[i].cache = &cache;
      calls[i].q = kvc::api::device_view(*context, q[i], bytes, ("q" + name).c_str());
      calls[i].out = kvc::api::device_view(*context, out[i], bytes, ("out" + name).c_str());
      const uint64_t score_bytes = kvc::size_product({cache.config().num_kv_heads, cache.layer(layer).slots_held, sizeof(float)});
      if (scores && scores[i].buffer)
        calls[i].scores = kvc::api::device_view(*context, scores[i], score_bytes, ("scores" + name).c_str());
    }
    kvc::attend_batch_device(*context->backend, layer, calls);
  });
}

kvc_status kvc_cache_append_batch_device(kvc_context* context, uint32_t n_caches, kvc_cache* const* caches, uint32_t layer,
                                         uint32_t n_tokens, kvc_dtype dtype, const kvc_buffer_view* k, const kvc_buffer_view* v) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] {
    require_batch("kvc_cache_append_batch_device", n_caches, KVC_APPEND_BATCH_MAX_CACHES, {caches, k, v}, "caches, k or v");
    std::vector<kvc::AppendCall> calls(n_caches);
    std::unordered_map<const kvc_cache*, uint32_t> listed;
    for (uint32_t i = 0; i < n_caches; ++i) {
      kvc::Cache& cache = batch_member(context, caches, i, dtype, listed, "each cache takes one chunk per call");
      for_cache(i, [&] { cache.check_append(layer, n_tokens); });
      const std::string name = "[" + std::to_string(i) + "]";
      const uint64_t bytes = kvc::size_product({n_tokens, cache.config().token_elements(), kvc::dtype_size(cache.config().dtype)});
      calls[i].cache = &cache;
      calls[i].k = kvc::api::device_view(*context, k[i], bytes, ("k" + name).c_str());
      calls[i].v = kvc::api::device_view(*context, v[i], bytes, ("v" + name).c_str());
    }
    kvc::append_batch_device(*context->backend, layer, n_tokens, calls);
  });
}

kvc_status kvc_cache_layer_slots(const kvc_cache* cache, uint32_t layer, uint32_t* out_slots) {
  return with_cache(cache, [&](kvc::Cache& c) {
    kvc::require(out_slots != nullptr, KVC_ERROR_NULL_POINTER, "kvc_cache_layer_slots: out_slots is NULL");
    kvc::require(layer < c.config().num_layers, KVC_ERROR_OUT_OF_RANGE, [&] {
      return "layer " + std::to_string(layer) + " is past the cache's " + std::to_string(c.config().num_layers) + " layers";
    });
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
    kvc::require(layer < c.config().num_layers, KVC_ERROR_OUT_OF_RANGE, [&] {
      return "layer " + std::to_string(layer) + " is past the cache's " + std::to_string(c.config().num_layers) + " layers";
    });
    const uint32_t slots = c.layer(layer).slots_held;
    kvc::require(max_slots >= slots, KVC_ERROR_BUFFER_TOO_SMALL, [&] {
      return "max_slots is " + std::to_string(max_slots) + " but layer " + std::to_string(layer) + " holds " + std::to_string(slots);
    });
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
