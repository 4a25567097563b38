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
  try {
    build(cache);
  } catch (...) {
    release();  // what was made before the failure
    throw;
  }
}

void Pipeline::build(VkPipelineCache cache) {
  const Device& device = device_;
  const KernelSpec& spec = spec_;
  const VkDevice vk_device = device.device();
  std::vector<VkDescriptorSetLayoutBinding> bindings(spec.num_buffers);
  for (uint32_t i = 0; i < spec.num_buffers; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, spec.binding_length(i), VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  const bool pushes = device.max_push_descriptors() > 0 && spec.descriptor_count() <= device.max_push_descriptors();
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  if (pushes) set_info.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  set_info.bindingCount = spec.num_buffers;
  set_info.pBindings = bindings.data();
  // Each handle reaches its member only once made: release() destroys what is there, and a
  // failed vkCreate* leaves its output undefined.
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  check(vkCreateDescriptorSetLayout(vk_device, &set_info, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
  set_layout_ = set_layout;

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, spec.push_bytes};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = spec.push_bytes ? 1 : 0;
  layout_info.pPushConstantRanges = &push;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  check(vkCreatePipelineLayout(vk_device, &layout_info, nullptr, &layout), "vkCreatePipelineLayout");
  layout_ = layout;
  if (pushes) {
    // Binding i takes the dispatch's buffers from its first on, in the order dispatch() lists them.
    std::vector<VkDescriptorUpdateTemplateEntry> entries(spec.num_buffers);
    for (uint32_t binding = 0, first = 0; binding < spec.num_buffers; first += spec.binding_length(binding++))
      entries[binding] = {binding, 0, spec.binding_length(binding), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                          first * sizeof(VkDescriptorBufferInfo), sizeof(VkDescriptorBufferInfo)};
    VkDescriptorUpdateTemplateCreateInfo template_info{VK_STRUCTURE_TYPE_DESCRIPTOR_UPDATE_TEMPLATE_CREATE_INFO};
    template_info.descriptorUpdateEntryCount = spec.num_buffers;
    template_info.pDescriptorUpdateEntries = entries.data();
    template_info.templateType = VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR;
    template_info.descriptorSetLayout = set_layout_;
    template_info.pipelineBindPoint = VK_PIPELINE_BIND_POINT_COMPUTE;
    template_info.pipelineLayout = layout_;
    template_info.set = 0;
    VkDescriptorUpdateTemplate push_template = VK_NULL_HANDLE;
    check(vkCreateDescriptorUpdateTemplate(vk_device, &template_info, nullptr, &push_template), "vkCreateDescriptorUpdateTemplate");
    push_template_ = push_template;
  }

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
  VkPipeline pipeline = VK_NULL_HANDLE;
  if (result == VK_SUCCESS) result = vkCreateComputePipelines(vk_device, cache, 1, &info, nullptr, &pipeline);
  vkDestroyShaderModule(vk_device, module, nullptr);
  check(result, ("vkCreateComputePipelines(" + spec.shader + ")").c_str());
  pipeline_ = pipeline;
  if (device.captures_pipeline_statistics()) {
    std::string name = spec.shader + " [";
    for (size_t i = 0; i < spec.constants.size(); ++i) name += (i ? " " : "") + std::to_string(spec.constants[i]);
    print_pipeline_statistics(vk_device, pipeline_, name + "]");
  }
}

Pipeline::~Pipeline() { release(); }

void Pipeline::release() {
  const VkDevice vk_device = device_.device();
  if (pipeline_) vkDestroyPipeline(vk_device, pipeline_, nullptr);
  if (push_template_) vkDestroyDescriptorUpdateTemplate(vk_device, push_template_, nullptr);
  if (layout_) vkDestroyPipelineLayout(vk_device, layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(vk_device, set_layout_, nullptr);
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
