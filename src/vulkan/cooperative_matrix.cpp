#include "vulkan/cooperative_matrix.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "vulkan/shader_registry.h"

namespace kvc::vk {
namespace {

bool has_extension(VkPhysicalDevice physical_device, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical_device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(physical_device, nullptr, &count, extensions.data());
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& extension) { return std::strcmp(extension.extensionName, name) == 0; });
}

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
  detail_ = "VK_KHR_cooperative_matrix: 16x16x16 f16 x f16 -> f32";
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
  vulkan12_.pNext = &vulkan11_;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &cooperative_;
  vkGetPhysicalDeviceFeatures2(physical_device, &features);
  if (!cooperative_.cooperativeMatrix || !vulkan12_.shaderFloat16 || !vulkan12_.vulkanMemoryModel)
    return "the device lacks cooperativeMatrix, shaderFloat16 or vulkanMemoryModel";

  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 properties2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  properties2.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(physical_device, &properties2);
  const VkSubgroupFeatureFlags operations =
      VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_VOTE_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  if (subgroup.subgroupSize != kCooperativeSubgroupSize || !(subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
      (subgroup.supportedOperations & operations) != operations)
    return "the kernels want 32-wide subgroups with basic, vote and shuffle operations (the device's are " +
           std::to_string(subgroup.subgroupSize) + " wide)";
  if (!lists_shape(instance, physical_device))
    return "the device lists no 16x16x16 f16 x f16 -> f32 subgroup shape";

  // Enable exactly what the kernels use; 16-bit storage where the device has it.
  const VkBool32 storage16 = vulkan11_.storageBuffer16BitAccess;
  cooperative_ = khr::CooperativeMatrixFeatures{};
  cooperative_.cooperativeMatrix = VK_TRUE;
  vulkan12_ = VkPhysicalDeviceVulkan12Features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  vulkan12_.shaderFloat16 = VK_TRUE;
  vulkan12_.vulkanMemoryModel = VK_TRUE;
  vulkan11_ = VkPhysicalDeviceVulkan11Features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  vulkan11_.storageBuffer16BitAccess = storage16;
  return "";
}

void CooperativeMatrixSetup::enable(VkDeviceCreateInfo& info) {
  if (path_ != MatrixPath::Cooperative) return;
  cooperative_.pNext = &vulkan12_;
  vulkan12_.pNext = &vulkan11_;
  vulkan11_.pNext = nullptr;
  info.pNext = &cooperative_;
  info.enabledExtensionCount = 1;
  info.ppEnabledExtensionNames = &extension_;
}

}  // namespace kvc::vk
