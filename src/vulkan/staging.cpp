#include "vulkan/staging.h"

#include <algorithm>

namespace kvc::vk {

void Staging::reset() {
  if (blocks_.size() > 1) {  // last submission overflowed the first block: merge into one
    blocks_.clear();
    blocks_.push_back(std::make_unique<Buffer>(device_, std::max(used_total_, kMinBlockBytes), MemoryKind::HostVisible));
  }
  used_in_last_ = 0;
  used_total_ = 0;
}

BufferSlice Staging::allocate(VkDeviceSize bytes) {
  const VkDeviceSize aligned = (bytes + 255) & ~VkDeviceSize(255);
  if (blocks_.empty() || used_in_last_ + aligned > blocks_.back()->size()) {
    blocks_.push_back(std::make_unique<Buffer>(device_, std::max(aligned, kMinBlockBytes), MemoryKind::HostVisible));
    used_in_last_ = 0;
  }
  BufferSlice slice{blocks_.back().get(), used_in_last_, bytes};
  used_in_last_ += aligned;
  used_total_ += aligned;
  return slice;
}

}  // namespace kvc::vk
