// A Vulkan device with one compute queue: instance and device selection (or an application's
// own objects), memory-type lookup, the pipeline cache, validation-message counting.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "vulkan/cooperative_matrix.h"
#include "vulkan/fragment_layout.h"
#include "vulkan/reclaimer.h"
#include "vulkan/trig_precision.h"
#include "vulkan/vk.h"

namespace kvc::vk {

class PipelineCache;
class Staging;

struct DeviceOptions {
  bool validation = false;
  int device_index = -1;  // -1: choose by type (discrete > integrated > virtual > CPU)
  // Take the cooperative-matrix kernels where the device has them (KVC_COOPERATIVE_MATRIX=0
  // in the environment turns them off for every device).
  bool cooperative_matrix = true;
};

struct ExternalHandles {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
};

class Device {
 public:
  // Throws Error(KVC_ERROR_NO_VULKAN_LOADER / KVC_ERROR_NO_DEVICE / KVC_ERROR_VULKAN).
  static std::unique_ptr<Device> create(const DeviceOptions& options);
  static std::unique_ptr<Device> wrap(const ExternalHandles& handles);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // False for an application's device (Device::wrap): its objects are not ours.
  bool owns_handles() const { return owns_handles_; }
  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical_device() const { return physical_device_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceProperties& properties() const { return properties_; }
  std::string name() const { return properties_.deviceName; }
  uint32_t subgroup_size() const { return subgroup_size_; }
  // The largest buffer with its own memory the device promises: maxMemoryAllocationSize (Vulkan
  // 1.1), and maxBufferSize where the device has Vulkan 1.3.
  uint64_t max_allocation_bytes() const { return max_allocation_bytes_; }
  // Whether a one-dimensional workgroup of `threads` with `shared_bytes` of shared memory fits.
  bool fits_workgroup(uint32_t threads, uint64_t shared_bytes) const {
    const VkPhysicalDeviceLimits& limits = properties_.limits;
    return shared_bytes <= limits.maxComputeSharedMemorySize && threads <= limits.maxComputeWorkGroupInvocations &&
           threads <= limits.maxComputeWorkGroupSize[0];
  }
  bool supports_timestamps() const { return timestamp_valid_bits_ != 0; }
  // Which kernels multiply tiles where both paths exist, and the shape or why SIMT. Fixed at
  // creation: the cooperative path enables VK_KHR_cooperative_matrix on this VkDevice. An
  // application's device (wrap) takes SIMT: which features it enabled is not known.
  MatrixPath matrix_path() const { return matrix_path_; }
  const std::string& matrix_path_detail() const { return matrix_path_detail_; }
  // Where the cooperative path's matrix elements sit in a subgroup (probed at creation; Opaque
  // on SIMT).
  FragmentLayout fragment_layout() const { return fragment_layout_; }
  // The largest error of the built-in cos and sin over a full turn, measured at creation
  // (vulkan/trig_precision.h; infinity where the probe failed), and whether it is within the
  // bound under which the decode kernel rotates keys by them.
  double builtin_trig_error() const { return builtin_trig_error_; }
  bool builtin_trig_precise() const { return builtin_trig_error_ <= kBuiltinTrigBound; }
  // Whether pipelines of cooperative-matrix shaders must require 32-wide full subgroups.
  bool requires_cooperative_subgroup_size() const { return requires_cooperative_subgroup_size_; }
  double timestamp_period_ns() const { return properties_.limits.timestampPeriod; }
  // Whether shaders may index arrays of storage buffers by a dynamically uniform value
  // (shaderStorageBufferArrayDynamicIndexing, enabled at creation). False on an application's
  // device (wrap): which features it enabled is not known.
  bool indexes_buffer_arrays() const { return indexes_buffer_arrays_; }
  // The most buffers a dispatch may push into the command buffer (VK_KHR_push_descriptor,
  // enabled at creation where offered); 0: dispatches bind descriptor sets from a pool. 0 on
  // an application's device (wrap): which extensions it enabled is not known.
  uint32_t max_push_descriptors() const { return max_push_descriptors_; }
  // KVC_PROFILE on a device with VK_KHR_pipeline_executable_properties: pipelines print what the
  // driver reports of them (vulkan/pipeline_statistics.h).
  bool captures_pipeline_statistics() const { return captures_pipeline_statistics_; }

  // A memory type index with all of `required` flags among `type_bits`, preferring one that
  // also has `preferred`; throws when none exists.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred = 0) const;

  PipelineCache& pipelines() { return *pipelines_; }
  Staging& staging() { return *staging_; }
  // Takes back the buffers recorded work no longer uses: kept for reuse, or freed off the
  // caller's thread.
  Reclaimer& reclaimer() { return *reclaimer_; }
  // Bytes of memory libkvc's buffers hold on this device now, what the reclaimer keeps or has
  // yet to free included (vk::Buffer counts them).
  uint64_t allocated_bytes() const { return allocated_bytes_.load(); }
  void count_allocation(int64_t bytes) { allocated_bytes_ += uint64_t(bytes); }
  // This device's own vkDestroyBuffer and vkFreeMemory (vkGetDeviceProcAddr, once): the
  // reclaimer's thread calls them, not the process-wide pointers that making another context
  // reloads (volkLoadInstance).
  PFN_vkDestroyBuffer destroy_buffer() const { return destroy_buffer_; }
  PFN_vkFreeMemory free_memory() const { return free_memory_; }

  // Whether this device's instance runs the validation layer (never for Device::wrap).
  bool validating() const { return messenger_ != VK_NULL_HANDLE; }
  // Validation-layer warnings and errors reported since creation (0 without validation); each
  // is also recorded process-wide, with its text (vulkan/validation_log.h).
  uint32_t validation_messages() const { return validation_messages_.load(); }

 private:
  Device() = default;
  void finish_setup();
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
      VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
      const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);

  bool owns_handles_ = false;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
  VkPhysicalDevice physical_device_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceProperties properties_{};
  VkPhysicalDeviceMemoryProperties memory_properties_{};
  uint32_t subgroup_size_ = 0;
  uint64_t max_allocation_bytes_ = 0;
  uint32_t timestamp_valid_bits_ = 0;
  MatrixPath matrix_path_ = MatrixPath::Simt;
  std::string matrix_path_detail_;
  bool requires_cooperative_subgroup_size_ = false;
  FragmentLayout fragment_layout_ = FragmentLayout::Opaque;
  double builtin_trig_error_ = std::numeric_limits<double>::infinity();
  bool indexes_buffer_arrays_ = false;
  uint32_t max_push_descriptors_ = 0;
  bool captures_pipeline_statistics_ = false;
  std::unique_ptr<PipelineCache> pipelines_;
  std::unique_ptr<Staging> staging_;
  std::unique_ptr<Reclaimer> reclaimer_;
  std::atomic<uint32_t> validation_messages_{0};
  std::atomic<uint64_t> allocated_bytes_{0};
  PFN_vkDestroyBuffer destroy_buffer_ = nullptr;
  PFN_vkFreeMemory free_memory_ = nullptr;
};

}  // namespace kvc::vk
