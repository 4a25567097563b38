#include "cache/layer_storage.h"

#include <vector>

namespace kvc {

LayerStorage make_layer_storage(Backend& backend, const CacheConfig& config, uint32_t slot_stride) {
  const size_t rows = size_t(config.num_kv_heads) * slot_stride, row_bytes = size_t(config.head_dim) * dtype_size(config.dtype);
  const std::vector<std::shared_ptr<Tensor>> parts = make_parts(backend, {rows * row_bytes, rows * row_bytes, rows * sizeof(int32_t)});
  return {parts[0], parts[1], parts[2]};
}

}  // namespace kvc
