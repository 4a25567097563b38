// Under KVC_PROFILE, what the driver reports of each compiled kernel (VK_KHR_pipeline_executable_properties:
// NVIDIA's register count, for one): the occupancy a kernel can reach, which timestamps alone do not
// show. Enabled only where the device offers the extension and profiling is on, since capturing
// statistics may cost the driver's pipeline caching.
#pragma once

#include <string>

#include "vulkan/vk.h"

namespace kvc::vk {

// The extension and its feature, when the device offers them and KVC_PROFILE is set: add() puts
// both on a device's create info (after any other pNext chain and extensions it already has).
class PipelineStatisticsSetup {
 public:
  explicit PipelineStatisticsSetup(VkPhysicalDevice physical_device);
  // add() hands the create info pointers to members.
  PipelineStatisticsSetup(const PipelineStatisticsSetup&) = delete;
  PipelineStatisticsSetup& operator=(const PipelineStatisticsSetup&) = delete;
  bool wanted() const { return wanted_; }
  void add(VkDeviceCreateInfo& info);

 private:
  bool wanted_ = false;
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR features_{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  const char* extensions_[2] = {};
};

// One line per executable of `pipeline` (created with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR)
// on stderr: "kvc profile: pipeline <name>: <statistic> <value>; ...".
void print_pipeline_statistics(VkDevice device, VkPipeline pipeline, const std::string& name);

}  // namespace kvc::vk
