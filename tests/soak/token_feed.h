// One append + attend of every layer, through the host path or the engine path, so the soak
// runs the same tokens through both.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kvc/kvc.h"
#include "soak/soak_inputs.h"
#include "soak/soak_options.h"

namespace kvc::soak {

class TokenFeed {
 public:
  // Engine path: per layer, one device buffer with room for K, V, Q and the output of
  // max_tokens tokens, allocated once (a soak must not allocate per token).
  TokenFeed(kvc_context* context, const kvc_cache_desc& desc, FeedPath path, uint32_t max_tokens);

  // Appends n_tokens of every layer and attends all of them, writing each layer's output
  // ([n_tokens][num_q_heads][head_dim]) into outputs[layer]. Host path: a submission per call;
  // engine path: the whole token in one step, waited for. Returns the first failure.
  kvc_status feed(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                  std::vector<std::vector<unsigned char>>& outputs);

 private:
  struct BufferDeleter {
    void operator()(kvc_buffer* buffer) const { kvc_buffer_destroy(buffer); }
  };
  // Offsets of one layer's tensors in its buffer, each a multiple of the context's alignment.
  struct Layout {
    uint64_t k = 0, v = 0, q = 0, out = 0, bytes = 0;
  };

  kvc_status feed_host(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                       std::vector<std::vector<unsigned char>>& outputs);
  // The step's calls; the caller ends and waits for the step whatever they return.
  kvc_status record_engine_step(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                                std::vector<std::vector<unsigned char>>& outputs);

  kvc_context* context_;
  kvc_cache_desc desc_;
  FeedPath path_;
  Layout layout_;
  std::vector<std::unique_ptr<kvc_buffer, BufferDeleter>> buffers_;  // engine path: one per layer
};

}  // namespace kvc::soak
