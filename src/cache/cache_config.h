// A cache's shape and settings, validated once at creation (see validate_cache_desc).
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "ops/rope.h"

namespace kvc {

struct CacheConfig {
  uint32_t num_layers = 0;
  uint32_t num_q_heads = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  Dtype dtype = Dtype::F32;
  uint32_t capacity = 0;  // slots per layer the application asked for
  kvc_policy policy = KVC_POLICY_FULL;
  const void* policy_params = nullptr;  // only read while the cache is created
  ops::RopeParams rope;

  uint32_t group_size() const { return num_q_heads / num_kv_heads; }
  size_t token_elements() const { return size_t(num_kv_heads) * head_dim; }        // one token's K (or V)
  size_t query_elements() const { return size_t(num_q_heads) * head_dim; }         // one token's Q (or O)
};

// Checks every field and the struct size; throws Error naming the field and its limit.
CacheConfig validate_cache_desc(const kvc_cache_desc* desc);

}  // namespace kvc
