#include "vulkan/reclaimer.h"

#include "vulkan/buffer.h"

namespace kvc::vk {

Reclaimer::Reclaimer() = default;

Reclaimer::~Reclaimer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_or_stopping_.notify_one();
  if (thread_.joinable()) thread_.join();
  queued_.clear();  // nothing left when the thread ran; everything when it never started
}

void Reclaimer::free_later(std::vector<std::unique_ptr<Buffer>> buffers) {
  if (buffers.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::unique_ptr<Buffer>& buffer : buffers) queued_.push_back(std::move(buffer));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  queued_or_stopping_.notify_one();
}

bool Reclaimer::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool pending = freeing_ || !queued_.empty();
  idle_.wait(lock, [this] { return !freeing_ && queued_.empty(); });
  return pending;
}

void Reclaimer::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    queued_or_stopping_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
    if (queued_.empty()) return;  // stopping, and everything is freed
    std::vector<std::unique_ptr<Buffer>> batch;
    batch.swap(queued_);
    freeing_ = true;
    lock.unlock();
    batch.clear();  // vkDestroyBuffer and vkFreeMemory, outside the lock
    lock.lock();
    freeing_ = false;
    if (queued_.empty()) idle_.notify_all();
  }
}

}  // namespace kvc::vk
