// Records one submission of compute work: uploads through staging, dispatches, read-backs and
// timestamps; submit() runs it and waits. Every command waits for the ones recorded before it
// (a full compute/transfer barrier), which is what every op sequence in libkvc needs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "vulkan/buffer.h"
#include "vulkan/pipeline.h"

namespace kvc::vk {

class Recorder {
 public:
  explicit Recorder(Device& device);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  Device& device() const { return device_; }

  // Starts a new recording; staging from the previous one is released.
  void begin();
  // Copies `bytes` from host memory now and records their copy into `dst`.
  void upload(const void* src, VkDeviceSize bytes, BufferSlice dst);
  // Records a copy of `src`; `dst` receives it when submit() returns.
  void download(BufferSlice src, void* dst, VkDeviceSize bytes);
  void copy(BufferSlice src, BufferSlice dst, VkDeviceSize bytes);
  void fill(BufferSlice dst, VkDeviceSize bytes, uint32_t word);
  // Binds `buffers` to bindings 0..n-1 and `push` (spec.push_bytes long) and dispatches.
  void dispatch(const KernelSpec& spec, std::initializer_list<BufferSlice> buffers, const void* push,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  // Writes a GPU timestamp once all earlier commands finished; returns its index.
  uint32_t timestamp();
  // Submits, waits for completion and delivers the read-backs.
  void submit();
  // Nanoseconds between two timestamps of the last submission.
  double elapsed_ns(uint32_t from, uint32_t to) const;
  // For third-party recorders (VkFFT): the command buffer being recorded, after a barrier.
  VkCommandBuffer raw_commands();

 private:
  void before_command();
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);

  struct Readback {
    BufferSlice staging;
    void* dst;
    VkDeviceSize bytes;
  };
  static constexpr uint32_t kMaxTimestamps = 256;
  static constexpr uint32_t kSetsPerPool = 256;

  Device& device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t current_pool_ = 0;
  std::vector<Readback> readbacks_;
  std::vector<uint64_t> timestamps_;
  uint32_t timestamps_written_ = 0;
  bool recording_ = false;
  bool needs_barrier_ = false;
};

}  // namespace kvc::vk
