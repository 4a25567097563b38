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

// What a shader expects: `num_buffers` storage buffers at set 0, bindings 0..n-1, a push
// constant block of `push_bytes`, and uint32 specialization constants with ids 0..n-1.
struct KernelSpec {
  std::string shader;
  uint32_t num_buffers = 0;
  uint32_t push_bytes = 0;
  std::vector<uint32_t> constants;

  bool operator<(const KernelSpec& other) const {
    return std::tie(shader, num_buffers, push_bytes, constants) <
           std::tie(other.shader, other.num_buffers, other.push_bytes, other.constants);
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
  const KernelSpec& spec() const { return spec_; }

 private:
  Device& device_;
  KernelSpec spec_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
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
