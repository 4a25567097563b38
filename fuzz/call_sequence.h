// Decodes fuzz input into a sequence of C API calls on one context (create caches with any
// descriptor, append, attend, both batched, read, end the prompt, reset, destroy) and checks after each:
// the status is a kvc_status; a failed call leaves a message and the cache as kvc_cache_read
// and kvc_cache_stats_get saw it before; a call given NaN or Inf fails; outputs and the cache
// stay finite while every input it took was moderate; reads are bounded by max_slots.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <memory>
#include <vector>

#include "cache_snapshot.h"
#include "kvc/kvc.h"

namespace kvc::fuzz {

class CallSequence {
 public:
  explicit CallSequence(kvc_context* context) : context_(context) {}
  CallSequence(const CallSequence&) = delete;
  CallSequence& operator=(const CallSequence&) = delete;
  ~CallSequence();  // destroys the caches the input left alive

  void run(FuzzedDataProvider& data);

 private:
  struct LiveCache {
    kvc_cache* handle = nullptr;
    kvc_cache_desc desc{};  // as created; policy_params pointed at the decoder's memory and is cleared
    bool moderate = true;   // every K and V it took was moderate, so what it holds must stay finite
  };

  void create(FuzzedDataProvider& data);
  void destroy(FuzzedDataProvider& data);
  void append(FuzzedDataProvider& data, LiveCache& cache, uint32_t layer, uint32_t n_tokens);
  void attend(FuzzedDataProvider& data, LiveCache& cache, uint32_t layer, uint32_t n_queries);
  // kvc_attend_batch_device over some of the live caches (device buffers for Q, out, scores).
  void attend_batch(FuzzedDataProvider& data, uint32_t layer);
  // kvc_cache_append_batch_device over some of the live caches (device buffers for K and V).
  void append_batch(FuzzedDataProvider& data, uint32_t layer, uint32_t n_tokens);
  void read(FuzzedDataProvider& data, LiveCache& cache);
  void inspect(FuzzedDataProvider& data, LiveCache& cache);
  // Appends a chunk of n_tokens to every layer and attends some of its queries (a decode step
  // when n_tokens is 1): the order a model runs, which random calls rarely reach, so that the
  // policies' compression paths are exercised.
  void prefill(FuzzedDataProvider& data, LiveCache& cache, uint32_t n_tokens);

  // Runs `call` on `cache` and checks what every call must keep (see the top of this file).
  template <typename Call>
  kvc_status checked(const char* name, LiveCache& cache, Call&& call);

  struct BufferDestroy {
    void operator()(kvc_buffer* buffer) const { kvc_buffer_destroy(buffer); }
  };
  using BufferPtr = std::unique_ptr<kvc_buffer, BufferDestroy>;

  // A batched call's caches: one to three of the live ones, now and then one twice.
  std::vector<LiveCache*> pick_batch(FuzzedDataProvider& data);
  // `bytes` in a new device buffer kept in `buffers`; a view with no buffer when none was made.
  kvc_buffer_view device_copy(const std::vector<unsigned char>& bytes, std::vector<BufferPtr>& buffers);
  // Checks what every batched call must keep (a status; a failure with a message that changed
  // none of `picked`, as `before` saw them; no cache accepted twice); true when it succeeded.
  bool batch_succeeded(const char* name, kvc_status status, const std::vector<LiveCache*>& picked,
                       const std::vector<CacheSnapshot>& before);

  kvc_context* context_;
  std::vector<LiveCache> caches_;
};

}  // namespace kvc::fuzz
