#include "cache_snapshot.h"

#include <algorithm>

#include "check.h"
#include "tensors.h"

namespace kvc::fuzz {

CacheSnapshot take_snapshot(kvc_cache* cache, const kvc_cache_desc& desc) {
  CacheSnapshot snapshot;
  kvc_cache_stats stats{};
  stats.struct_size = sizeof(stats);
  if (kvc_cache_stats_get(cache, &stats) != KVC_OK) report_finding("kvc_cache_stats_get", "failed on a live cache");
  snapshot.tokens_seen = stats.tokens_seen;
  snapshot.slots_held = stats.slots_held;
  snapshot.device_bytes_held = stats.device_bytes_held;
  snapshot.compressions = stats.compressions;
  snapshot.layers.resize(desc.num_layers);
  const size_t row_elements = size_t(desc.num_kv_heads) * desc.head_dim;
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
    LayerContents& contents = snapshot.layers[layer];
    if (kvc_cache_layer_slots(cache, layer, &contents.slots) != KVC_OK)
      report_finding("kvc_cache_layer_slots", "failed on a live cache's layer");
    contents.k = poisoned_bytes(desc.dtype, contents.slots * row_elements);
    contents.v = poisoned_bytes(desc.dtype, contents.slots * row_elements);
    contents.positions.assign(size_t(contents.slots) * desc.num_kv_heads, -7);
    if (kvc_cache_read(cache, layer, contents.slots, desc.dtype, contents.k.data(), contents.v.data(), contents.positions.data()) != KVC_OK)
      report_finding("kvc_cache_read", "failed with max_slots = kvc_cache_layer_slots");
  }
  return snapshot;
}

bool holds_only_finite(const CacheSnapshot& snapshot, kvc_dtype dtype) {
  return std::all_of(snapshot.layers.begin(), snapshot.layers.end(), [&](const LayerContents& layer) {
    return holds_only_finite(layer.k, dtype) && holds_only_finite(layer.v, dtype);
  });
}

}  // namespace kvc::fuzz
