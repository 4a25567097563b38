// A prompt for the observation-window policy tests: per layer K, V and Q of every token in
// the cache dtype, fed through the C API in chunks (append, then attend every chunk token).
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "common/dtype.h"
#include "kvc/kvc.h"
#include "support/test_support.h"

namespace kvc::test {

struct Prompt {
  uint32_t tokens = 0;
  std::vector<std::vector<float>> k, v, q;  // per layer: [tokens][heads][head_dim], rounded to the dtype
};

inline Prompt random_prompt(const kvc_cache_desc& desc, uint32_t tokens, float q_range) {
  Prompt prompt;
  prompt.tokens = tokens;
  const Dtype dtype = static_cast<Dtype>(desc.dtype);
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
    prompt.k.push_back(random_floats(size_t(tokens) * desc.num_kv_heads * desc.head_dim));
    prompt.v.push_back(random_floats(size_t(tokens) * desc.num_kv_heads * desc.head_dim));
    prompt.q.push_back(random_floats(size_t(tokens) * desc.num_q_heads * desc.head_dim, -q_range, q_range));
    encode(prompt.k.back(), dtype);
    encode(prompt.v.back(), dtype);
    encode(prompt.q.back(), dtype);
  }
  return prompt;
}

// Appends and attends the prompt chunk by chunk, every layer; chunks sum to prompt.tokens.
inline void feed(kvc_cache* cache, const kvc_cache_desc& desc, const Prompt& prompt, const std::vector<uint32_t>& chunks) {
  const Dtype dtype = static_cast<Dtype>(desc.dtype);
  const size_t kv_row = size_t(desc.num_kv_heads) * desc.head_dim, q_row = size_t(desc.num_q_heads) * desc.head_dim;
  uint32_t first = 0;
  for (uint32_t n : chunks) {
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
      auto part = [&](const std::vector<float>& all, size_t row) {
        std::vector<float> values(all.begin() + first * row, all.begin() + (first + n) * row);
        return encode(values, dtype);
      };
      const std::vector<unsigned char> k = part(prompt.k[layer], kv_row), v = part(prompt.v[layer], kv_row), q = part(prompt.q[layer], q_row);
      std::vector<unsigned char> out(q.size());
      REQUIRE(kvc_cache_append(cache, layer, n, desc.dtype, k.data(), v.data()) == KVC_OK);
      REQUIRE(kvc_attend(cache, layer, n, desc.dtype, q.data(), out.data(), nullptr) == KVC_OK);
    }
    first += n;
  }
}

}  // namespace kvc::test
