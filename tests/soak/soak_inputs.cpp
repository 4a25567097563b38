#include "soak/soak_inputs.h"

#include "common/dtype.h"

namespace kvc::soak {

InputGenerator::InputGenerator(const kvc_cache_desc& desc, uint64_t seed)
    : desc_(desc), random_(seed), layers_(desc.num_layers) {}

const std::vector<LayerInputs>& InputGenerator::next(uint32_t n_tokens) {
  const size_t kv_count = size_t(n_tokens) * desc_.num_kv_heads * desc_.head_dim,
               q_count = size_t(n_tokens) * desc_.num_q_heads * desc_.head_dim;
  for (LayerInputs& layer : layers_) {
    fill(layer.k, kv_count, 1.0f);
    fill(layer.v, kv_count, 1.0f);
    fill(layer.q, q_count, 3.0f);
  }
  return layers_;
}

void InputGenerator::fill(std::vector<unsigned char>& bytes, size_t count, float scale) {
  const Dtype dtype = static_cast<Dtype>(desc_.dtype);
  bytes.resize(count * dtype_size(dtype));
  for (size_t i = 0; i < count; ++i) store_element(bytes.data(), dtype, i, scale * unit_(random_));
}

}  // namespace kvc::soak
