// Everything a caller can observe of a cache: its counters and, per layer, what
// kvc_cache_read returns. A failed call must leave it exactly as it was.
#pragma once

#include <cstdint>
#include <vector>

#include "kvc/kvc.h"

namespace kvc::fuzz {

struct LayerContents {
  uint32_t slots = 0;
  std::vector<unsigned char> k, v;
  std::vector<int32_t> positions;
  bool operator==(const LayerContents& other) const {
    return slots == other.slots && k == other.k && v == other.v && positions == other.positions;
  }
};

struct CacheSnapshot {
  uint64_t tokens_seen = 0, slots_held = 0, device_bytes_held = 0, compressions = 0;
  std::vector<LayerContents> layers;
  bool operator==(const CacheSnapshot& other) const {
    return tokens_seen == other.tokens_seen && slots_held == other.slots_held && device_bytes_held == other.device_bytes_held &&
           compressions == other.compressions && layers == other.layers;
  }
};

// Reads every layer of a cache created from `desc`; reading a live cache must succeed, so a
// failure is reported as a finding.
CacheSnapshot take_snapshot(kvc_cache* cache, const kvc_cache_desc& desc);

// Whether every K and V value the snapshot holds is finite.
bool holds_only_finite(const CacheSnapshot& snapshot, kvc_dtype dtype);

}  // namespace kvc::fuzz
