#include "cache/cache_config.h"

#include <cmath>
#include <cstddef>
#include <string>

namespace kvc {
namespace {

constexpr uint32_t kMaxQueryHeads = 65535;

}  // namespace

CacheConfig validate_cache_desc(const kvc_cache_desc* desc) {
  require(desc != nullptr, KVC_ERROR_NULL_POINTER, "kvc_cache_create: desc is NULL");
  require(desc->struct_size >= offsetof(kvc_cache_desc, policy_params), KVC_ERROR_INVALID_ARGUMENT,
          "kvc_cache_desc.struct_size is " + std::to_string(desc->struct_size) + "; set it to sizeof(kvc_cache_desc)");
  const bool has_params = desc->struct_size >= offsetof(kvc_cache_desc, policy_params) + sizeof(void*);
  CacheConfig config;
  config.num_layers = desc->num_layers;
  config.num_q_heads = desc->num_q_heads;
  config.num_kv_heads = desc->num_kv_heads;
  config.head_dim = desc->head_dim;
  config.capacity = desc->capacity;
  config.policy = desc->policy;
  config.policy_params = has_params ? desc->policy_params : nullptr;

  require(config.num_layers >= 1 && config.num_layers <= 4096, KVC_ERROR_INVALID_ARGUMENT,
          "num_layers is " + std::to_string(config.num_layers) + "; it must be 1..4096");
  require(config.num_kv_heads >= 1 && config.num_kv_heads <= 1024, KVC_ERROR_INVALID_ARGUMENT,
          "num_kv_heads is " + std::to_string(config.num_kv_heads) + "; it must be 1..1024");
  // Attention gives each query head a workgroup: at most the 65535 per dimension any Vulkan
  // device dispatches (which also keeps a token's Q, [num_q_heads][head_dim], below 2^26 bytes).
  require(config.num_q_heads >= 1 && config.num_q_heads <= kMaxQueryHeads && config.num_q_heads % config.num_kv_heads == 0,
          KVC_ERROR_INVALID_ARGUMENT,
          "num_q_heads is " + std::to_string(config.num_q_heads) + "; it must be a multiple of num_kv_heads (" +
              std::to_string(config.num_kv_heads) + ") in 1.." + std::to_string(kMaxQueryHeads));
  require(config.head_dim >= 8 && config.head_dim <= 256 && config.head_dim % 8 == 0, KVC_ERROR_INVALID_ARGUMENT,
          "head_dim is " + std::to_string(config.head_dim) + "; it must be a multiple of 8 in 8..256");
  require(desc->dtype == KVC_DTYPE_F32 || desc->dtype == KVC_DTYPE_F16, KVC_ERROR_INVALID_ARGUMENT,
          "dtype " + std::to_string(desc->dtype) + " is neither KVC_DTYPE_F32 nor KVC_DTYPE_F16");
  config.dtype = static_cast<Dtype>(desc->dtype);
  require(config.capacity >= 1 && config.capacity <= (1u << 28), KVC_ERROR_INVALID_ARGUMENT,
          "capacity is " + std::to_string(config.capacity) + "; it must be 1..2^28 slots");

  require(desc->rope_style == KVC_ROPE_NONE || desc->rope_style == KVC_ROPE_NEOX || desc->rope_style == KVC_ROPE_INTERLEAVED,
          KVC_ERROR_INVALID_ARGUMENT, "rope_style " + std::to_string(desc->rope_style) + " is not a kvc_rope_style");
  config.rope.style = desc->rope_style;
  if (desc->rope_style != KVC_ROPE_NONE) {
    const uint32_t dims = desc->rope_dims ? desc->rope_dims : desc->head_dim;
    require(dims % 8 == 0 && dims <= desc->head_dim, KVC_ERROR_INVALID_ARGUMENT,
            "rope_dims is " + std::to_string(dims) + "; it must be a multiple of 8 and at most head_dim");
    require(std::isfinite(desc->rope_theta) && desc->rope_theta > 1.0f, KVC_ERROR_INVALID_ARGUMENT,
            "rope_theta is " + std::to_string(desc->rope_theta) + "; it must be finite and > 1");
    config.rope.rotary_dims = dims;
    config.rope.theta = desc->rope_theta;
  }
  return config;
}

}  // namespace kvc
