// The policies that bound a cache's memory, each as a small model-shaped cache the soak drives
// for as long as it is asked, with what kvc.h promises about the slots it reads back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvc/kvc.h"

namespace kvc::soak {

// What kvc.h says kvc_cache_read's positions are under a policy.
enum class PositionRule {
  InCacheRank,  // STREAMING, H2O, TOVA, TREEKV: each kv head's slots carry 0 .. slots-1 in some order
  SlotIndex,    // FREQKV (its index in the cache), FOURIER (sinks, middle at sinks + t, window: all in order)
  FaedKvStream, // FAEDKV: sinks and reconstructed segment their slot index, the recent window its token positions
};

struct SoakCase {
  std::string name;
  kvc_policy policy = KVC_POLICY_FULL;
  kvc_rope_style rope_style = KVC_ROPE_NONE;  // FAEDKV and FOURIER refuse libkvc's RoPE
  uint32_t capacity = 0;
  uint32_t prompt_tokens = 0;  // one append, then one attend of all of them
  bool ends_prefill = false;   // kvc_cache_end_prefill after the prompt
  // FOURIER keeps at most `capacity` tokens in all (its translated window T): the soak resets
  // the cache and feeds the prompt again when a layer is full, so the resets are soaked too.
  bool refills = false;
  // Decode tokens after which slots held and device bytes repeat once the policy is in its
  // steady state (an eviction per token, a FreqKV compression, a FOURIER refill): the warm-up
  // covers two of them.
  uint32_t memory_period = 0;
  PositionRule positions = PositionRule::SlotIndex;
  uint32_t faedkv_recent_window = 0;  // FaedKvStream: the window whose slots carry stream positions

  kvc_eviction_params eviction = kvc_eviction_params_default();
  kvc_freqkv_params freqkv = kvc_freqkv_params_default();
  kvc_faedkv_params faedkv = kvc_faedkv_params_default();
  kvc_fourier_params fourier = kvc_fourier_params_default();

  // The descriptor; it points into this case's parameters, so the case must outlive the cache.
  kvc_cache_desc desc(kvc_dtype dtype) const;
};

// STREAMING, H2O, TOVA, TREEKV, FREQKV, FAEDKV and FOURIER, in that order.
std::vector<SoakCase> soak_cases();

// "" when `positions` ([num_kv_heads][slots], as kvc_cache_read returns them) are what `rule`
// promises for a layer that has taken `layer_tokens_seen` tokens; else what is wrong.
std::string check_positions(const SoakCase& soak_case, const std::vector<int32_t>& positions, uint32_t num_kv_heads,
                            uint32_t slots, uint64_t layer_tokens_seen);

}  // namespace kvc::soak
