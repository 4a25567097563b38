// How kvc-bench's engine rows drive libkvc: as an inference engine does, through the public C
// API (include/kvc/kvc.h) alone. Only the GPU time of each submission comes from inside
// (Backend::last_submission_gpu_us), to set beside the wall clock.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bench_harness.h"
#include "kvc/kvc.h"

namespace kvc::bench {

// How an engine hands libkvc a layer's work:
//  Host:   kvc_cache_append + kvc_attend with host arrays; every call stages, submits and waits.
//  Device: kvc_cache_append_device + kvc_attend_device; every call submits and waits.
//  Step:   the device calls of all layers recorded in one step: one submission, one wait.
//  Decode: the step path, each layer's decode token in one kvc_decode_device.
//  StepChain, DecodeChain: the two step paths as a model's layers run: layer l + 1's Q, K and V
//    are read from layer l's output (so each layer's work waits for the layer before, as a
//    model's does, where the other rows hand every layer its inputs at once).
enum class EnginePath { Host, Device, Step, Decode, StepChain, DecodeChain };
const char* path_name(EnginePath path);

struct EngineShape {
  uint32_t layers = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
};

using CachePtr = std::unique_ptr<kvc_cache, void (*)(kvc_cache*)>;

// A Vulkan context, and random f16 inputs for calls of up to `max_tokens` tokens, as host arrays
// and as device buffers holding the same values. Every cache it makes has `shape`, f16 and NeoX
// RoPE (FAEDKV's none: it takes keys as the model stores them, rotated). A call that fails throws kvc::Error with its status and the context's last error.
class EngineSession {
 public:
  EngineSession(const EngineShape& shape, uint32_t max_tokens);

  // Destroy every cache before the session.
  CachePtr create_cache(kvc_policy policy, uint32_t capacity, const void* policy_params);
  // Appends `tokens` tokens to every layer, in calls of up to max_tokens, attending none.
  void fill(kvc_cache* cache, uint32_t tokens);
  // kvc_cache_reset.
  void reset(kvc_cache* cache);
  // reset, then fill.
  void refill(kvc_cache* cache, uint32_t tokens);
  // One model step: every layer appends n tokens and attends their n queries, the `path` way,
  // then kvc_cache_end_prefill when `end_prefill` (inside the step on the step path). Returns
  // the GPU time of what it submitted (0 where unknown) and, on the step path, the host's time
  // recording the step.
  RunTimes run_step(kvc_cache* cache, EnginePath path, uint32_t n, bool end_prefill);
  // One decode step of many caches in one step: every layer appends a token to each cache and
  // attends them all, in one kvc_cache_append_batch_device and one kvc_attend_batch_device
  // (`batched`), or per cache in kvc_cache_append_device and kvc_attend_device (what an engine
  // ran before). Returns the step's GPU and recording times.
  RunTimes run_batch_step(const std::vector<kvc_cache*>& caches, bool batched);
  // kvc_cache_end_prefill on its own; returns its GPU time.
  double end_prefill(kvc_cache* cache);
  // A call that failed inside a step leaves the step open: this ends it, so that the next row
  // can begin its own.
  void end_open_step();

 private:
  void check(kvc_status status, const char* call) const;
  double last_submission_gpu_us() const;

  using ContextPtr = std::unique_ptr<kvc_context, void (*)(kvc_context*)>;
  using BufferPtr = std::unique_ptr<kvc_buffer, void (*)(kvc_buffer*)>;
  BufferPtr create_buffer(const std::vector<uint16_t>& values);

  EngineShape shape_;
  uint32_t max_tokens_;
  ContextPtr context_{nullptr, kvc_context_destroy};  // declared first: destroyed after the buffers
  // K and V take the same values: what they hold does not change the work.
  std::vector<uint16_t> kv_host_, q_host_, out_host_;
  // Two outputs, so that a chained layer reads the output of the layer before while it writes.
  BufferPtr kv_{nullptr, kvc_buffer_destroy}, q_{nullptr, kvc_buffer_destroy}, out_{nullptr, kvc_buffer_destroy},
      chain_out_{nullptr, kvc_buffer_destroy};
};

}  // namespace kvc::bench
