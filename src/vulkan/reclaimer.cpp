#include "vulkan/reclaimer.h"

#include "vulkan/buffer.h"

namespace kvc::vk {

Reclaimer::Reclaimer(uint64_t budget) : budget_(budget) {}

Reclaimer::~Reclaimer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_or_stopping_.notify_one();
  if (thread_.joinable()) thread_.join();
  queued_.clear();  // nothing left when the thread ran; everything when it never started
  kept_.clear();
}

std::unique_ptr<Buffer> Reclaimer::take(VkDeviceSize bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const VkDeviceSize most = bytes + bytes / 8;
  size_t best = kept_.size();
  for (size_t i = 0; i < kept_.size(); ++i) {
    const VkDeviceSize size = kept_[i]->size();
    if (size >= bytes && size <= most && (best == kept_.size() || size < kept_[best]->size())) best = i;
  }
  if (best == kept_.size()) return nullptr;
  std::unique_ptr<Buffer> buffer = std::move(kept_[best]);
  kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
  kept_bytes_ -= buffer->size();
  return buffer;
}

void Reclaimer::give_back(std::vector<std::unique_ptr<Buffer>> buffers) {
  if (buffers.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Called from destructors (a tensor's): a buffer that cannot be queued or kept (no memory
    // for the list, no thread to be had) is freed here as the loop leaves it, on the caller's path.
    try {
      for (std::unique_ptr<Buffer>& buffer : buffers) {
        if (!buffer->reusable() || buffer->size() > budget_ || budget_ == 0) {
          free_soon(std::move(buffer));
          continue;
        }
        kept_.push_back(std::move(buffer));
        kept_bytes_ += kept_.back()->size();
        while (kept_bytes_ > budget_) {
          kept_bytes_ -= kept_.front()->size();
          std::unique_ptr<Buffer> oldest = std::move(kept_.front());
          kept_.erase(kept_.begin());
          free_soon(std::move(oldest));
        }
      }
    } catch (...) {
    }
  }
  queued_or_stopping_.notify_one();
}

void Reclaimer::free_soon(std::unique_ptr<Buffer> buffer) {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  queued_.push_back(std::move(buffer));
}

bool Reclaimer::free_all() {
  std::vector<std::unique_ptr<Buffer>> kept;
  bool pending = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    kept.swap(kept_);
    kept_bytes_ = 0;
    pending = freeing_ || !queued_.empty() || !kept.empty();
    try {
      for (std::unique_ptr<Buffer>& buffer : kept) free_soon(std::move(buffer));
    } catch (...) {
      // No thread or queue to be had: what `kept` still holds is freed below, on the caller's path.
    }
    queued_or_stopping_.notify_one();
    idle_.wait(lock, [this] { return !freeing_ && queued_.empty(); });
  }
  return pending;
}

uint64_t Reclaimer::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_bytes_;
}

void Reclaimer::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    queued_or_stopping_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
    if (queued_.empty()) return;  // stopping, and everything queued is freed
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
