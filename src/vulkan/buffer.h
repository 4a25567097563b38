// A VkBuffer with its own memory (device-local for data, host-visible for staging), or an
// application's VkBuffer used in place (not owned: never destroyed here).
#pragma once

#include <cstddef>
#include <memory>

#include "vulkan/vk.h"

namespace kvc::vk {

class Device;

enum class MemoryKind {
  DeviceLocal,  // the GPU's own memory: caches, scratch
  HostVisible   // mapped, coherent; cached where the device offers it (fast read-back)
};

class Buffer {
 public:
  Buffer(Device& device, VkDeviceSize size, MemoryKind kind);
  // `size` bytes of an application's buffer, used without copying; the application owns it.
  static std::unique_ptr<Buffer> borrow(Device& device, VkBuffer buffer, VkDeviceSize size);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  VkDeviceSize size() const { return size_; }
  void* mapped() const { return mapped_; }  // nullptr for DeviceLocal
  // Owned device-local memory, which vk::Reclaimer may hand out again.
  bool reusable() const { return owned_ && kind_ == MemoryKind::DeviceLocal; }
  // An application's buffer (borrow()), whose memory other VkBuffers may alias.
  bool borrowed() const { return !owned_; }

 private:
  explicit Buffer(Device& device) : device_(device) {}

  Device& device_;
  bool owned_ = true;
  MemoryKind kind_ = MemoryKind::DeviceLocal;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  VkDeviceSize allocated_ = 0;  // bytes of memory_ (0 for a borrowed buffer)
  void* mapped_ = nullptr;
};

// A byte range of a buffer, as shaders bind it.
struct BufferSlice {
  const Buffer* buffer = nullptr;
  VkDeviceSize offset = 0;
  VkDeviceSize size = VK_WHOLE_SIZE;
};

}  // namespace kvc::vk
