// A layer's K ([num_kv_heads][slot_stride][head_dim]), V (the same) and positions (int32
// [num_kv_heads][slot_stride]), as a cache holds them and a policy compacts them into.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "cache/cache_config.h"

namespace kvc {

struct LayerStorage {
  std::shared_ptr<Tensor> k, v, positions;
};

// Parts of one allocation on Vulkan (make_parts): one device allocation a layer, not three.
LayerStorage make_layer_storage(Backend& backend, const CacheConfig& config, uint32_t slot_stride);

}  // namespace kvc
