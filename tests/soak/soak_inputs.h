// Random K, V and Q for the soak, a fresh draw per append, encoded in the cache's dtype.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kvc/kvc.h"

namespace kvc::soak {

// One layer's part of an append: K and V [n_tokens][num_kv_heads][head_dim], Q
// [n_tokens][num_q_heads][head_dim], as kvc.h lays them out.
struct LayerInputs {
  std::vector<unsigned char> k, v, q;
};

class InputGenerator {
 public:
  InputGenerator(const kvc_cache_desc& desc, uint64_t seed);

  // Every layer's inputs for n_tokens: K and V uniform in [-1, 1], Q in [-3, 3] so that softmax
  // is peaky and the score-driven policies (H2O, TOVA, TREEKV) keep different tokens.
  const std::vector<LayerInputs>& next(uint32_t n_tokens);

 private:
  void fill(std::vector<unsigned char>& bytes, size_t count, float scale);

  kvc_cache_desc desc_;
  std::mt19937_64 random_;
  std::uniform_real_distribution<float> unit_{-1.0f, 1.0f};
  std::vector<LayerInputs> layers_;
};

}  // namespace kvc::soak
