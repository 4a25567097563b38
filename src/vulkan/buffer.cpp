#include "vulkan/buffer.h"

#include <algorithm>

#include "vulkan/device.h"
#include "vulkan/faults.h"

namespace kvc::vk {

Buffer::Buffer(Device& device, VkDeviceSize size, MemoryKind kind) : device_(device), kind_(kind), size_(size) {
  // Zero-sized buffers are invalid in Vulkan; keep one word so empty tensors bind.
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = std::max<VkDeviceSize>(size, 4);
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device.device(), &info, nullptr, &buffer_), "vkCreateBuffer");
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(device.device(), buffer_, &requirements);
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = requirements.size;
  alloc.memoryTypeIndex =
      kind == MemoryKind::DeviceLocal
          ? device.memory_type(requirements.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
          : device.memory_type(requirements.memoryTypeBits,
                               VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                               VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  VkResult result = faults::injected(faults::Op::AllocateMemory);  // stands for both tries below
  if (result == VK_SUCCESS) {
    result = vkAllocateMemory(device.device(), &alloc, nullptr, &memory_);
    // Memory kept for reuse or on its way back (vk::Reclaimer) counts as free: free it, then
    // try again (always: what the thread freed during the first try was not free for it).
    if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
      device.reclaimer().free_all();
      result = vkAllocateMemory(device.device(), &alloc, nullptr, &memory_);
    }
  }
  if (result != VK_SUCCESS) {
    vkDestroyBuffer(device.device(), buffer_, nullptr);
    check(result, "vkAllocateMemory");
  }
  vkBindBufferMemory(device.device(), buffer_, memory_, 0);
  if (kind == MemoryKind::HostVisible) {
    VkResult map_result = faults::injected(faults::Op::MapMemory);
    if (map_result == VK_SUCCESS) map_result = vkMapMemory(device.device(), memory_, 0, VK_WHOLE_SIZE, 0, &mapped_);
    if (map_result != VK_SUCCESS) {
      vkDestroyBuffer(device.device(), buffer_, nullptr);
      vkFreeMemory(device.device(), memory_, nullptr);
      check(map_result, "vkMapMemory");
    }
  }
  allocated_ = alloc.allocationSize;
  device_.count_allocation(int64_t(allocated_));
}

std::unique_ptr<Buffer> Buffer::borrow(Device& device, VkBuffer buffer, VkDeviceSize size) {
  std::unique_ptr<Buffer> borrowed(new Buffer(device));
  borrowed->owned_ = false;
  borrowed->buffer_ = buffer;
  borrowed->size_ = size;
  return borrowed;
}

Buffer::~Buffer() {
  if (!owned_) return;
  // Through the device's own entry points: this may run on the reclaimer's thread.
  device_.destroy_buffer()(device_.device(), buffer_, nullptr);
  device_.free_memory()(device_.device(), memory_, nullptr);
  device_.count_allocation(-int64_t(allocated_));
}

}  // namespace kvc::vk
