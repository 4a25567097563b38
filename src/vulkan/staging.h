// Host-visible memory for the uploads and read-backs of one submission: a bump arena that
// is emptied when a recording begins and grows (into one block) when a submission needed more.
#pragma once

#include <memory>
#include <vector>

#include "vulkan/buffer.h"

namespace kvc::vk {

class Staging {
 public:
  explicit Staging(Device& device) : device_(device) {}

  // Forgets every allocation; called when a recording begins.
  void reset();
  // `bytes` of mapped memory valid until the next reset().
  BufferSlice allocate(VkDeviceSize bytes);

 private:
  static constexpr VkDeviceSize kMinBlockBytes = VkDeviceSize(4) << 20;
  Device& device_;
  std::vector<std::unique_ptr<Buffer>> blocks_;
  VkDeviceSize used_in_last_ = 0;
  VkDeviceSize used_total_ = 0;
};

}  // namespace kvc::vk
