// Helpers for tests that drive libkvc through its C API.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvc/kvc.h"

namespace kvc::test {

struct ContextDeleter {
  void operator()(kvc_context* context) const { kvc_context_destroy(context); }
};
struct CacheDeleter {
  void operator()(kvc_cache* cache) const { kvc_cache_destroy(cache); }
};
using ContextPtr = std::unique_ptr<kvc_context, ContextDeleter>;
using CachePtr = std::unique_ptr<kvc_cache, CacheDeleter>;

// A context on `backend` (VULKAN with validation as test::validation_mode() says); null when
// that backend is unavailable here.
ContextPtr make_context(kvc_backend backend, uint32_t flags = 0);  // flags beside the validation layer's
CachePtr make_cache(kvc_context* context, const kvc_cache_desc& desc);

// A small model-shaped descriptor: 2 layers, 8 q / 2 kv heads, head_dim 64, NeoX RoPE.
kvc_cache_desc small_cache_desc(kvc_dtype dtype, uint32_t capacity);
// test::scores_tolerance for attention over a cache of `desc` in `context`, `n_queries` at once:
// a chunk of an f16 cache takes cooperative matrices where the context's path says so.
double cache_scores_tolerance(kvc_context* context, const kvc_cache_desc& desc, uint32_t n_queries);

// One step's random K, V (in [-1, 1]) and Q (in [-3, 3], for peaky softmax) for n tokens of
// a cache shaped by `desc`, encoded in its dtype.
struct StepInputs {
  std::vector<unsigned char> k, v, q;
};
StepInputs random_step_inputs(const kvc_cache_desc& desc, uint32_t n_tokens);

// Everything kvc_cache_read returns for one layer, plus the slot count.
struct LayerSnapshot {
  uint32_t slots = 0;
  std::vector<unsigned char> k, v;
  std::vector<int32_t> positions;
  bool operator==(const LayerSnapshot& other) const {
    return slots == other.slots && k == other.k && v == other.v && positions == other.positions;
  }
};
LayerSnapshot snapshot(kvc_cache* cache, uint32_t layer);

// Whether a cache of `desc` stores keys rotated (FULL with RoPE): the CPU and Vulkan backends
// each rotate them in their own arithmetic and round to the dtype, so their keys may differ
// by that rounding.
bool stores_rotated_keys(const kvc_cache_desc& desc);
// Checks a layer of a Vulkan cache against the CPU's: slots, positions and V bit for bit, and K
// too unless stored rotated; then each key element within what the two rotations' roundings
// allow, relative to its rotary pair's magnitude (api_helpers.cpp derives it).
void check_same_layer(const LayerSnapshot& gpu, const LayerSnapshot& cpu, const kvc_cache_desc& desc);

// Runs `call` and expects `status`, a last-error message on `context` that contains
// `message_part`, and every layer of `cache` as it was (slots, K, V, positions, tokens seen).
void expect_refused(kvc_context* context, kvc_cache* cache, kvc_status status, const std::function<kvc_status()>& call,
                    const std::string& message_part = "");

// Tolerances of a comparison of two backends, relative to the compared values' scale.
struct BackendTolerances {
  double output;  // attention outputs
  double kv;      // K and V as kvc_cache_read returns them
};

// Appends and (unless `attend` is false) attends the same random chunk of n tokens of `layer`
// on two caches of `desc` (no scores), then checks their outputs, slots, positions and K/V agree.
void check_same_chunk(kvc_cache* gpu, kvc_cache* cpu, const kvc_cache_desc& desc, uint32_t layer, uint32_t n,
                      const BackendTolerances& tolerances, bool attend = true);

}  // namespace kvc::test
