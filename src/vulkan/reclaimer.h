// Frees buffers on a thread of its own. Giving device memory back is slow on some drivers (an
// H100 with driver 580: 73 ms for the 35 buffers, 4.4 GB, that a 32K-token prompt's storage and
// its selection's workspace leave at kvc_cache_end_prefill), and the caller would otherwise wait
// for it in kvc_step_wait or kvc_cache_destroy, with the GPU idle.
//
// Only buffers no recorded work can still use are handed over. An allocation that fails for
// want of memory drains the queue and tries once more (vk::Buffer), so memory given back this
// way is never missed; kvc_context_trim drains it too.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kvc::vk {

class Buffer;

class Reclaimer {
 public:
  Reclaimer();
  ~Reclaimer();  // frees whatever is still queued, then ends the thread
  Reclaimer(const Reclaimer&) = delete;
  Reclaimer& operator=(const Reclaimer&) = delete;

  // Frees `buffers` soon, on the reclaimer's thread (started by the first call).
  void free_later(std::vector<std::unique_ptr<Buffer>> buffers);
  // Returns once everything handed over so far is freed; whether anything was still queued or
  // being freed when called.
  bool drain();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable queued_or_stopping_, idle_;
  std::vector<std::unique_ptr<Buffer>> queued_;
  bool freeing_ = false;  // the thread holds a batch taken from queued_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvc::vk
