// kvc_eviction_params: defaults as each paper sets them, and every field checked at cache
// creation with a message naming the field and its limit.
#include <string>

#include "ops/tree_prefill.h"
#include "policies/eviction.h"

namespace kvc {
namespace {

constexpr uint32_t kMaxChunkSlots = 1u << 24;
constexpr uint32_t kMaxCapacity = 1u << 28;  // validate_cache_desc's limit on capacity

ops::EvictionRule rule_of(kvc_policy policy, bool select_left) {
  switch (policy) {
    case KVC_POLICY_STREAMING: return ops::EvictionRule::Oldest;
    case KVC_POLICY_H2O: return ops::EvictionRule::Accumulated;
    case KVC_POLICY_TOVA: return ops::EvictionRule::CurrentQuery;
    default: return select_left ? ops::EvictionRule::TreeLeft : ops::EvictionRule::Tree;
  }
}

}  // namespace

EvictionSettings validate_eviction_params(const CacheConfig& config) {
  kvc_eviction_params params = kvc_eviction_params_default();
  if (config.policy_params) {
    const auto* given = static_cast<const kvc_eviction_params*>(config.policy_params);
    require(given->struct_size == sizeof(kvc_eviction_params), KVC_ERROR_INVALID_ARGUMENT,
            "kvc_eviction_params.struct_size is " + std::to_string(given->struct_size) + "; set it to sizeof(kvc_eviction_params)");
    params = *given;
  }
  const bool streaming = config.policy == KVC_POLICY_STREAMING, tree = config.policy == KVC_POLICY_TREEKV;
  require(params.chunk_slots >= 1 && params.chunk_slots <= kMaxChunkSlots, KVC_ERROR_INVALID_ARGUMENT,
          "kvc_eviction_params.chunk_slots is " + std::to_string(params.chunk_slots) + "; it must be 1..2^24");
  require(params.select_left_token <= 1 && (tree || params.select_left_token == 0), KVC_ERROR_INVALID_ARGUMENT,
          "kvc_eviction_params.select_left_token is " + std::to_string(params.select_left_token) +
              "; it must be 0, or 1 with KVC_POLICY_TREEKV");
  require(params.prefill_block >= 1 && params.prefill_block <= kMaxChunkSlots, KVC_ERROR_INVALID_ARGUMENT,
          "kvc_eviction_params.prefill_block is " + std::to_string(params.prefill_block) + "; it must be 1..2^24");

  EvictionSettings settings;
  settings.rule = rule_of(config.policy, params.select_left_token != 0);
  settings.sinks = params.sinks;
  settings.chunk_slots = params.chunk_slots;
  settings.prefill_block = params.prefill_block;
  for (uint32_t layer = 0; layer < config.num_layers; ++layer) {
    const uint32_t c = params.layer_capacities ? params.layer_capacities[layer] : config.capacity;
    const std::string field = params.layer_capacities ? "kvc_eviction_params.layer_capacities[" + std::to_string(layer) + "]"
                                                      : std::string("capacity");
    require(c >= 1 && c <= kMaxCapacity, KVC_ERROR_INVALID_ARGUMENT,
            field + " is " + std::to_string(c) + "; it must be 1..2^28 slots");
    // StreamingLLM keeps the sinks and the c - sinks newest tokens; the others keep what
    // their recent window does not cover for the policy to select from.
    uint32_t window = params.recent_window;
    if (streaming) window = c > params.sinks ? c - params.sinks : 0;
    else if (window == KVC_RECENT_WINDOW_DEFAULT) window = c / 2 > params.sinks ? c / 2 - params.sinks : 0;
    const uint64_t protected_slots = uint64_t(params.sinks) + (streaming ? 0 : window);
    require(protected_slots < c, KVC_ERROR_INVALID_ARGUMENT,
            field + " is " + std::to_string(c) + "; it must exceed kvc_eviction_params.sinks (" + std::to_string(params.sinks) +
                ")" + (streaming ? std::string() : " + recent_window (" + std::to_string(window) + ")") +
                " so that some token can be evicted");
    const uint64_t tree_blocks = (c - protected_slots) / params.prefill_block;
    require(!tree || tree_blocks < ops::kMaxTreeBlocks, KVC_ERROR_INVALID_ARGUMENT,
            field + " is " + std::to_string(c) + "; with KVC_POLICY_TREEKV, (cache size - sinks - recent_window) / prefill_block (" +
                std::to_string(tree_blocks) + ") must be below " + std::to_string(ops::kMaxTreeBlocks) + ": raise prefill_block");
    settings.capacities.push_back(c);
    settings.recent_windows.push_back(window);
  }
  return settings;
}

}  // namespace kvc
