// One append + attend of every layer, through the host path or the engine path, so the soak
// runs the same tokens through both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvc/kvc.h"
#include "soak/soak_inputs.h"
#include "soak/soak_options.h"

namespace kvc::soak {

class TokenFeed {
 public:
  // Engine path: one device buffer with room for every layer's K, V, Q and output of
  // max_tokens tokens, allocated once (a soak must not allocate per token).
  TokenFeed(kvc_context* context, const kvc_cache_desc& desc, FeedPath path, uint32_t max_tokens);

  // Appends n_tokens of every layer and attends all of them, writing each layer's output
  // ([n_tokens][num_q_heads][head_dim]) into outputs[layer]. Host path: a submission per call;
  // engine path: the whole token in one step, waited for. Returns the first failure.
  kvc_status feed(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                  std::vector<std::vector<unsigned char>>& outputs);

  // feed()'s calls recorded into the step the caller has open, so that several caches share
  // one step (kvc-soak --lockstep); outputs are written when the caller's kvc_step_wait
  // returns KVC_OK.
  kvc_status record(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                    std::vector<std::vector<unsigned char>>& outputs);

  // The last-error message of the call that failed the last feed() or record(), taken when it
  // failed: a step's end, or other runs' calls in the same step, replace the context's.
  const std::string& failure() const { return failure_; }

 private:
  struct BufferDeleter {
    void operator()(kvc_buffer* buffer) const { kvc_buffer_destroy(buffer); }
  };
  // Offsets of one layer's tensors in the buffer, each a multiple of the context's alignment:
  // every layer's K, V and Q first, so that one kvc_buffer_write carries a token's inputs.
  struct LayerPlaces {
    uint64_t k = 0, v = 0, q = 0, out = 0;
  };
  struct Layout {
    std::vector<LayerPlaces> layers;
    uint64_t inputs_bytes = 0;  // the inputs' span, from offset 0
    uint64_t bytes = 0;         // inputs and outputs
  };
  // The places of n_tokens tokens, packed for them: a decode token writes a few hundred bytes,
  // not the prompt's span.
  Layout layout(uint32_t n_tokens) const;
  // `status`, and on a failure the context's last error noted (the first one of a feed).
  kvc_status noted(kvc_status status);

  // outputs[layer] sized for n_tokens tokens of every layer.
  void size_outputs(uint32_t n_tokens, std::vector<std::vector<unsigned char>>& outputs) const;
  kvc_status feed_host(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                       std::vector<std::vector<unsigned char>>& outputs);

  kvc_context* context_;
  kvc_cache_desc desc_;
  FeedPath path_;
  uint64_t alignment_ = 0;
  std::vector<unsigned char> inputs_;                  // the next write: every layer's K, V, Q as placed
  std::unique_ptr<kvc_buffer, BufferDeleter> buffer_;  // engine path only, sized for max_tokens
  std::string failure_;
};

}  // namespace kvc::soak
