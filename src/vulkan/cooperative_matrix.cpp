#include "vulkan/cooperative_matrix.h"

#include <algorithm>
#include <vector>

#include "vulkan/shader_registry.h"

namespace kvc::vk {
namespace {

bool lists_shape(VkInstance instance, VkPhysicalDevice physical_device) {
  const auto get_properties = reinterpret_cast<khr::GetCooperativeMatrixProperties>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!get_properties) return false;
  uint32_t count = 0;
  if (get_properties(physical_device, &count, nullptr) != VK_SUCCESS) return false;
  std::vector<khr::CooperativeMatrixProperties> shapes(count);
  if (get_properties(physical_device, &count, shapes.data()) != VK_SUCCESS) return false;
  return std::any_of(shapes.begin(), shapes.end(), [](const khr::CooperativeMatrixProperties& shape) {
    return shape.MSize == kCooperativeMatrixSize && shape.NSize == kCooperativeMatrixSize &&
           shape.KSize == kCooperativeMatrixSize && shape.AType == khr::kComponentFloat16 &&
           shape.BType == khr::kComponentFloat16 && shape.CType == khr::kComponentFloat32 &&
           shape.ResultType == khr::kComponentFloat32 && shape.scope == khr::kScopeSubgroup;
  });
}

}  // namespace

CooperativeMatrixSetup::CooperativeMatrixSetup(VkInstance instance, uint32_t instance_api,
                                               VkPhysicalDevice physical_device, bool wanted) {
  const std::string why_not = probe(instance, instance_api, physical_device, wanted);
  if (!why_not.empty()) {
    detail_ = "SIMT: " + why_not;
    return;
  }
  path_ = MatrixPath::Cooperative;
  detail_ = std::string("VK_KHR_cooperative_matrix: 16x16x16 f16 x f16 -> f32") +
            (requires_subgroup_size_ ? ", subgroups required 32 wide" : "");
}

std::string CooperativeMatrixSetup::probe(VkInstance instance, uint32_t instance_api, VkPhysicalDevice physical_device,
                                          bool wanted) {
  if (!wanted) return "cooperative matrices turned off (KVC_CONTEXT_NO_COOPERATIVE_MATRIX or KVC_COOPERATIVE_MATRIX=0)";
  if (!has_embedded_shader("attention_prefill_coopmat"))
    return "this build has no cooperative-matrix shaders (configured without glslang >= 13)";
  VkPhysicalDeviceProperties properties;
  vkGetPhysicalDeviceProperties(physical_device, &properties);
  // The shaders are SPIR-V 1.6 (the extension's GLSL needs it), which Vulkan 1.3 consumes.
  if (instance_api < VK_API_VERSION_1_3 || properties.apiVersion < VK_API_VERSION_1_3)
    return "the loader or the device is older than Vulkan 1.3";
  if (!has_extension(physical_device, khr::kCooperativeMatrixExtension))
    return "the device does not offer VK_KHR_cooperative_matrix";

  cooperative_.pNext = &vulkan12_;
  vulkan12_.pNext = &vulkan13_;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &cooperative_;
  vkGetPhysicalDeviceFeatures2(physical_device, &features);
  if (!cooperative_.cooperativeMatrix || !vulkan12_.shaderFloat16 || !vulkan12_.vulkanMemoryModel)
    return "the device lacks cooperativeMatrix, shaderFloat16 or vulkanMemoryModel";

  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceVulkan13Properties sizes{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
  subgroup.pNext = &sizes;
  VkPhysicalDeviceProperties2 properties2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  properties2.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(physical_device, &properties2);
  const VkSubgroupFeatureFlags operations =
      VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_VOTE_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  if (!(subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) || (subgroup.supportedOperations & operations) != operations)
    return "the device's compute subgroups lack basic, vote or shuffle operations";
  // The kernels give a lane pair to each of a matrix's 16 rows: their subgroups must be 32
  // wide, which a device whose size varies per pipeline (Intel 8..32, AMD 32 or 64) guarantees
  // only when the pipeline requires it (Vulkan 1.3's subgroup size control).
  const bool always_32 = sizes.minSubgroupSize == kCooperativeSubgroupSize && sizes.maxSubgroupSize == kCooperativeSubgroupSize;
  const bool can_require_32 = vulkan13_.subgroupSizeControl && vulkan13_.computeFullSubgroups &&
                              (sizes.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                              sizes.minSubgroupSize <= kCooperativeSubgroupSize && kCooperativeSubgroupSize <= sizes.maxSubgroupSize;
  if (!always_32 && !can_require_32)
    return "the kernels want 32-wide subgroups; the device's are " + std::to_string(sizes.minSubgroupSize) + ".." +
           std::to_string(sizes.maxSubgroupSize) + " wide, without a way to require 32";
  if (!always_32 && sizes.maxComputeWorkgroupSubgroups < kCooperativeMaxSubgroups)
    return "with 32-wide subgroups required the device takes " + std::to_string(sizes.maxComputeWorkgroupSubgroups) +
           " per workgroup; the kernels use up to " + std::to_string(kCooperativeMaxSubgroups);
  if (!lists_shape(instance, physical_device))
    return "the device lists no 16x16x16 f16 x f16 -> f32 subgroup shape";

  // Enable exactly what the kernels use.
  requires_subgroup_size_ = !always_32;
  cooperative_ = khr::CooperativeMatrixFeatures{};
  cooperative_.cooperativeMatrix = VK_TRUE;
  vulkan12_ = VkPhysicalDeviceVulkan12Features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  vulkan12_.shaderFloat16 = VK_TRUE;
  vulkan12_.vulkanMemoryModel = VK_TRUE;
  vulkan13_ = VkPhysicalDeviceVulkan13Features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  vulkan13_.subgroupSizeControl = requires_subgroup_size_;
  vulkan13_.computeFullSubgroups = requires_subgroup_size_;
  return "";
}

void CooperativeMatrixSetup::enable(VkDeviceCreateInfo& info) {
  if (path_ != MatrixPath::Cooperative) return;
  cooperative_.pNext = &vulkan12_;
  vulkan12_.pNext = &vulkan13_;
  vulkan13_.pNext = nullptr;
  info.pNext = &cooperative_;
  info.enabledExtensionCount = 1;
  info.ppEnabledExtensionNames = &extension_;
}

}  // namespace kvc::vk
