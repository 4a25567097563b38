// Compute pipelines built from the embedded SPIR-V: one per (shader, specialization constants),
// created once per context and kept in a VkPipelineCache.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "vulkan/vk.h"

namespace kvc::vk {

class Device;

// What a shader expects: `num_buffers` storage-buffer bindings at set 0, bindings 0..n-1, a
// push constant block of `push_bytes`, and uint32 specialization constants with ids 0..n-1.
// Binding i < array_lengths.size() is an array of array_lengths[i] buffers (indexed by a
// dynamically uniform value: Device::indexes_buffer_arrays), every other binding one buffer.
struct KernelSpec {
  std::string shader;
  uint32_t num_buffers = 0;
  uint32_t push_bytes = 0;
  std::vector<uint32_t> constants;
  std::vector<uint32_t> array_lengths;

  // Buffers a dispatch binds: every binding's, the arrays' elements counted one by one.
  uint32_t descriptor_count() const {
    uint32_t count = num_buffers;
    for (size_t i = 0; i < array_lengths.size() && i < num_buffers; ++i) count += array_lengths[i] - 1;
    return count;
  }
  uint32_t binding_length(uint32_t binding) const { return binding < array_lengths.size() ? array_lengths[binding] : 1; }

  bool operator<(const KernelSpec& other) const {
    return std::tie(shader, num_buffers, push_bytes, constants, array_lengths) <
           std::tie(other.shader, other.num_buffers, other.push_bytes, other.constants, other.array_lengths);
  }
};

class Pipeline {
 public:
  Pipeline(Device& device, VkPipelineCache cache, const KernelSpec& spec);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  // Where the device pushes descriptors and the buffers fit (Device::max_push_descriptors): the
  // template that pushes a dispatch's buffers, in dispatch()'s order, as VkDescriptorBufferInfo
  // entries; otherwise VK_NULL_HANDLE and dispatches bind a set allocated from a pool.
  VkDescriptorUpdateTemplate push_template() const { return push_template_; }
  const KernelSpec& spec() const { return spec_; }
  // Whether the shader may write binding `binding` (false where it declares it readonly).
  bool writes(uint32_t binding) const { return written_bindings_[binding]; }

 private:
  void build(VkPipelineCache cache);
  void release();  // every handle made so far

  Device& device_;
  KernelSpec spec_;
  std::vector<bool> written_bindings_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  VkDescriptorUpdateTemplate push_template_ = VK_NULL_HANDLE;
};

class PipelineCache {
 public:
  explicit PipelineCache(Device& device);
  ~PipelineCache();

  // The pipeline for `spec`, built on first use.
  const Pipeline& get(const KernelSpec& spec);
  size_t size() const { return pipelines_.size(); }

 private:
  Device& device_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::map<KernelSpec, std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace kvc::vk
