// VK_KHR_cooperative_matrix (tensor cores through Vulkan): whether a device can run libkvc's
// cooperative-matrix kernels, and what its VkDevice must enable for them. Debian 12's Vulkan
// headers (1.3.239) predate the extension (1.3.255): its structs are declared here.
#pragma once

#include <cstdint>
#include <string>

#include "vulkan/vk.h"

namespace kvc::vk {

// How the Vulkan kernels multiply tiles where both paths exist (kvc_matrix_path).
enum class MatrixPath : uint32_t { Simt = 0, Cooperative = 1 };

// The matrix shape every *_coopmat shader uses: M = N = K = 16, f16 x f16 -> f32, subgroup
// scope (listed by NVIDIA from Volta on, AMD RDNA3 and Intel Arc).
constexpr uint32_t kCooperativeMatrixSize = 16;
// The shaders give a lane pair to each of a matrix's 16 rows: their pipelines run 32-wide
// subgroups, full ones, which devices whose size varies are told to (requires_subgroup_size).
constexpr uint32_t kCooperativeSubgroupSize = 32;
// The most subgroups a cooperative-matrix workgroup holds (256 threads).
constexpr uint32_t kCooperativeMaxSubgroups = 8;

// The extension's structs and entry point, as the Vulkan registry defines them.
namespace khr {
constexpr const char* kCooperativeMatrixExtension = "VK_KHR_cooperative_matrix";
constexpr VkStructureType kFeaturesType = static_cast<VkStructureType>(1000506000);
constexpr VkStructureType kPropertiesType = static_cast<VkStructureType>(1000506001);
constexpr uint32_t kComponentFloat16 = 0, kComponentFloat32 = 1;  // VkComponentTypeKHR
constexpr uint32_t kScopeSubgroup = 3;                             // VkScopeKHR

struct CooperativeMatrixFeatures {  // VkPhysicalDeviceCooperativeMatrixFeaturesKHR
  VkStructureType sType = kFeaturesType;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

struct CooperativeMatrixProperties {  // VkCooperativeMatrixPropertiesKHR
  VkStructureType sType = kPropertiesType;
  void* pNext = nullptr;
  uint32_t MSize = 0, NSize = 0, KSize = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;  // VkScopeKHR
};

using GetCooperativeMatrixProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CooperativeMatrixProperties*);
}  // namespace khr

// What a device offers for the cooperative-matrix path, probed before vkCreateDevice; when the
// path is taken, enable() adds the extension and the features it needs to the device's create
// info (this object must outlive vkCreateDevice: the create info points into it).
class CooperativeMatrixSetup {
 public:
  // `wanted` false (KVC_CONTEXT_NO_COOPERATIVE_MATRIX) chooses SIMT without asking the device.
  CooperativeMatrixSetup(VkInstance instance, uint32_t instance_api, VkPhysicalDevice physical_device, bool wanted);

  MatrixPath path() const { return path_; }
  // The shape taken, or why the SIMT kernels run.
  const std::string& detail() const { return detail_; }
  // Whether the cooperative-matrix pipelines must require kCooperativeSubgroupSize and full
  // subgroups (a device whose subgroup size varies per pipeline), or get them anyway.
  bool requires_subgroup_size() const { return requires_subgroup_size_; }

  // Adds the extension and its features to `info` (whose pNext must be empty); a no-op on SIMT.
  void enable(VkDeviceCreateInfo& info);

 private:
  // Why the device cannot take the path ("" when it can; then the features to enable are set).
  std::string probe(VkInstance instance, uint32_t instance_api, VkPhysicalDevice physical_device, bool wanted);

  MatrixPath path_ = MatrixPath::Simt;
  std::string detail_;
  bool requires_subgroup_size_ = false;
  const char* extension_ = khr::kCooperativeMatrixExtension;
  khr::CooperativeMatrixFeatures cooperative_{};
  VkPhysicalDeviceVulkan12Features vulkan12_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan13Features vulkan13_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
};

}  // namespace kvc::vk
