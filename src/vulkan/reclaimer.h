// Takes back the buffers libkvc lets go of, once no recorded work can use them. Device-local
// ones are kept for reuse, up to a budget (a quarter of the device's largest device-local
// heap), so that storage asked for again takes no allocation: a selection's cache reset for
// its next prompt gets its prompt storage back, a cache made where one was destroyed gets that
// one's. On an H100 (driver 580) allocating cost about 28 ms per GB (42 ms for the 1.5 GB of
// a 32K prompt's FAEDKV spectra) and freeing 17 ms per GB (73 ms for a 32K prompt's storage
// at the end of its selection), both on the caller's path. What the budget does not hold is
// freed on a thread of the reclaimer's own, off the caller's path.
//
// An allocation that fails for want of memory frees everything kept and tries once more
// (vk::Buffer); kvc_context_trim frees everything kept and returns once it is all back.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "vulkan/vk.h"

namespace kvc::vk {

class Buffer;

class Reclaimer {
 public:
  // Keeps at most `budget` bytes of device-local buffers for reuse (0: keeps none).
  explicit Reclaimer(uint64_t budget);
  ~Reclaimer();  // frees whatever is still kept or queued, then ends the thread
  Reclaimer(const Reclaimer&) = delete;
  Reclaimer& operator=(const Reclaimer&) = delete;

  // A kept device-local buffer of `bytes` to `bytes` + 1/8 (the most a reuse may waste), the
  // smallest such, or null.
  std::unique_ptr<Buffer> take(VkDeviceSize bytes);
  // Takes `buffers` back: kept for reuse, the oldest kept making room past the budget, or freed
  // soon on the reclaimer's thread (started by the first); never throws.
  void give_back(std::vector<std::unique_ptr<Buffer>> buffers);
  // Frees everything kept and returns once everything given back so far is freed; whether
  // there was anything to free or still being freed. Never throws.
  bool free_all();
  // Bytes of the buffers kept for reuse.
  uint64_t kept_bytes() const;

 private:
  void run();
  // Queues `buffer` for the thread (started by the first); the caller holds mutex_. Throws
  // when the queue or the thread cannot be had, `buffer` then freed as the exception leaves.
  void free_soon(std::unique_ptr<Buffer> buffer);

  const uint64_t budget_;
  mutable std::mutex mutex_;
  std::condition_variable queued_or_stopping_, idle_;
  std::vector<std::unique_ptr<Buffer>> kept_;    // oldest first
  uint64_t kept_bytes_ = 0;
  std::vector<std::unique_ptr<Buffer>> queued_;  // to be freed
  bool freeing_ = false;                         // the thread holds a batch taken from queued_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvc::vk
