#include "vulkan/pipeline.h"

#include <algorithm>

#include "vulkan/device.h"
#include "vulkan/faults.h"
#include "vulkan/pipeline_statistics.h"
#include "vulkan/shader_access.h"
#include "vulkan/shader_registry.h"

namespace kvc::vk {
namespace {

const ShaderModuleWords& find_shader(const std::string& name) {
  const auto& shaders = embedded_shaders();
  const auto it = std::find_if(shaders.begin(), shaders.end(),
                               [&](const ShaderModuleWords& shader) { return name == shader.name; });
  require(it != shaders.end(), KVC_ERROR_INTERNAL, "no embedded shader named " + name);
  return *it;
}

}  // namespace

Pipeline::Pipeline(Device& device, VkPipelineCache cache, const KernelSpec& spec) : device_(device), spec_(spec) {
  const VkDevice vk_device = device.device();
  std::vector<VkDescriptorSetLayoutBinding> bindings(spec.num_buffers);
  for (uint32_t i = 0; i < spec.num_buffers; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, spec.binding_length(i), VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = spec.num_buffers;
  set_info.pBindings = bindings.data();
  check(vkCreateDescriptorSetLayout(vk_device, &set_info, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, spec.push_bytes};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = spec.push_bytes ? 1 : 0;
  layout_info.pPushConstantRanges = &push;
  check(vkCreatePipelineLayout(vk_device, &layout_info, nullptr, &layout_), "vkCreatePipelineLayout");

  const ShaderModuleWords& words = find_shader(spec.shader);
  written_bindings_ = written_bindings(words.words, words.word_count, spec.num_buffers);
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = words.word_count * 4;
  module_info.pCode = words.words;
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(vk_device, &module_info, nullptr, &module), "vkCreateShaderModule");

  std::vector<VkSpecializationMapEntry> entries(spec.constants.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4u, 4u};
  VkSpecializationInfo specialization{static_cast<uint32_t>(entries.size()), entries.data(),
                                      spec.constants.size() * 4, spec.constants.data()};
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &specialization;
  // Cooperative-matrix shaders (named *_coopmat) are written for 32-wide full subgroups.
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo subgroup_size{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  subgroup_size.requiredSubgroupSize = kCooperativeSubgroupSize;
  const std::string coopmat_suffix = "_coopmat";
  const bool coopmat = spec.shader.size() > coopmat_suffix.size() &&
                       spec.shader.compare(spec.shader.size() - coopmat_suffix.size(), coopmat_suffix.size(), coopmat_suffix) == 0;
  if (coopmat && device.requires_cooperative_subgroup_size()) {
    info.stage.pNext = &subgroup_size;
    info.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  info.layout = layout_;
  if (device.captures_pipeline_statistics()) info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkResult result = faults::injected(faults::Op::CreatePipeline);
  if (result == VK_SUCCESS) result = vkCreateComputePipelines(vk_device, cache, 1, &info, nullptr, &pipeline_);
  vkDestroyShaderModule(vk_device, module, nullptr);
  if (result != VK_SUCCESS) {
    vkDestroyPipelineLayout(vk_device, layout_, nullptr);
    vkDestroyDescriptorSetLayout(vk_device, set_layout_, nullptr);
    check(result, ("vkCreateComputePipelines(" + spec.shader + ")").c_str());
  }
  if (device.captures_pipeline_statistics()) {
    std::string name = spec.shader + " [";
    for (size_t i = 0; i < spec.constants.size(); ++i) name += (i ? " " : "") + std::to_string(spec.constants[i]);
    print_pipeline_statistics(vk_device, pipeline_, name + "]");
  }
}

Pipeline::~Pipeline() {
  vkDestroyPipeline(device_.device(), pipeline_, nullptr);
  vkDestroyPipelineLayout(device_.device(), layout_, nullptr);
  vkDestroyDescriptorSetLayout(device_.device(), set_layout_, nullptr);
}

PipelineCache::PipelineCache(Device& device) : device_(device) {
  VkPipelineCacheCreateInfo info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  check(vkCreatePipelineCache(device.device(), &info, nullptr, &cache_), "vkCreatePipelineCache");
}

PipelineCache::~PipelineCache() {
  pipelines_.clear();
  vkDestroyPipelineCache(device_.device(), cache_, nullptr);
}

const Pipeline& PipelineCache::get(const KernelSpec& spec) {
  auto it = pipelines_.find(spec);
  if (it == pipelines_.end()) it = pipelines_.emplace(spec, std::make_unique<Pipeline>(device_, cache_, spec)).first;
  return *it->second;
}

}  // namespace kvc::vk
