#include "vulkan/pipeline_statistics.h"

#include <cinttypes>
#include <cstdio>
#include <vector>

#include "vulkan/profile.h"

namespace kvc::vk {

PipelineStatisticsSetup::PipelineStatisticsSetup(VkPhysicalDevice physical_device)
    : wanted_(profiling_enabled() && has_extension(physical_device, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
  features_.pipelineExecutableInfo = VK_TRUE;
}

void PipelineStatisticsSetup::add(VkDeviceCreateInfo& info) {
  if (!wanted_) return;
  require(info.enabledExtensionCount <= 1, KVC_ERROR_INTERNAL, "PipelineStatisticsSetup::add: room for one earlier extension");
  features_.pNext = const_cast<void*>(info.pNext);
  info.pNext = &features_;
  const uint32_t earlier = info.enabledExtensionCount;
  if (earlier) extensions_[0] = info.ppEnabledExtensionNames[0];
  extensions_[earlier] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  info.enabledExtensionCount = earlier + 1;
  info.ppEnabledExtensionNames = extensions_;
}

void print_pipeline_statistics(VkDevice device, VkPipeline pipeline, const std::string& name) {
  VkPipelineInfoKHR pipeline_info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pipeline_info.pipeline = pipeline;
  uint32_t executables = 0;
  if (vkGetPipelineExecutablePropertiesKHR(device, &pipeline_info, &executables, nullptr) != VK_SUCCESS) return;
  for (uint32_t index = 0; index < executables; ++index) {
    VkPipelineExecutableInfoKHR executable{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    executable.pipeline = pipeline;
    executable.executableIndex = index;
    uint32_t count = 0;
    if (vkGetPipelineExecutableStatisticsKHR(device, &executable, &count, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> statistics(count, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (vkGetPipelineExecutableStatisticsKHR(device, &executable, &count, statistics.data()) != VK_SUCCESS) continue;
    std::string line = "kvc profile: pipeline " + name + ":";
    for (const VkPipelineExecutableStatisticKHR& statistic : statistics) {
      char value[64];
      switch (statistic.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: std::snprintf(value, sizeof(value), "%s", statistic.value.b32 ? "yes" : "no"); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: std::snprintf(value, sizeof(value), "%" PRId64, statistic.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: std::snprintf(value, sizeof(value), "%" PRIu64, statistic.value.u64); break;
        default: std::snprintf(value, sizeof(value), "%g", statistic.value.f64); break;
      }
      line += std::string(" ") + statistic.name + " " + value + ";";
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace kvc::vk
