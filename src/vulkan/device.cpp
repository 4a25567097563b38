#include "vulkan/device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "vulkan/pipeline.h"
#include "vulkan/pipeline_statistics.h"
#include "vulkan/staging.h"
#include "vulkan/validation_log.h"

namespace kvc::vk {
namespace {

// What vk::Reclaimer keeps for reuse: a quarter of the largest device-local heap, or nothing
// where KVC_BUFFER_REUSE=0 (the fault-injection suite, which counts allocations call by call).
uint64_t reuse_budget(const VkPhysicalDeviceMemoryProperties& memory) {
  const char* reuse = std::getenv("KVC_BUFFER_REUSE");
  if (reuse && std::strcmp(reuse, "0") == 0) return 0;
  uint64_t largest = 0;
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    if (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) largest = std::max<uint64_t>(largest, memory.memoryHeaps[i].size);
  return largest / 4;
}

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// volk's entry points are process-wide; guard their (re)loading.
std::mutex& volk_mutex() {
  static std::mutex mutex;
  return mutex;
}

void load_loader(PFN_vkGetInstanceProcAddr custom) {
  if (custom) {
    volkInitializeCustom(custom);
    return;
  }
  if (volkGetInstanceVersion() != 0) return;
  require(volkInitialize() == VK_SUCCESS, KVC_ERROR_NO_VULKAN_LOADER,
          "no Vulkan loader: libvulkan.so.1 could not be loaded (install libvulkan1 and a driver, "
          "or use KVC_BACKEND_CPU)");
}

bool layer_available(const char* name) {
  uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  return std::any_of(layers.begin(), layers.end(),
                     [&](const VkLayerProperties& layer) { return std::strcmp(layer.layerName, name) == 0; });
}

int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

// The first queue family with compute, preferring one without graphics (a dedicated compute
// queue runs beside an application's rendering); UINT32_MAX when none.
uint32_t compute_queue_family(VkPhysicalDevice physical_device) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_device, &count, families.data());
  uint32_t chosen = UINT32_MAX;
  for (uint32_t i = 0; i < count; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (chosen == UINT32_MAX || !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) chosen = i;
    if (!(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) break;
  }
  return chosen;
}

}  // namespace

std::unique_ptr<Device> Device::create(const DeviceOptions& options) {
  std::lock_guard<std::mutex> lock(volk_mutex());
  load_loader(nullptr);
  require(volkGetInstanceVersion() >= VK_API_VERSION_1_1, KVC_ERROR_NO_DEVICE,
          "the Vulkan loader is older than 1.1");

  std::unique_ptr<Device> self(new Device());
  self->owns_handles_ = true;

  const char* env_validation = std::getenv("KVC_VALIDATION");
  const bool validation = options.validation || (env_validation && std::strcmp(env_validation, "0") != 0);
  require(!validation || layer_available(kValidationLayer), KVC_ERROR_UNSUPPORTED,
          "validation was asked for but VK_LAYER_KHRONOS_validation is not installed "
          "(Debian: vulkan-validationlayers)");

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "libkvc";
  app.pEngineName = "libkvc";
  // 1.3 where the loader has it: the cooperative-matrix shaders are SPIR-V 1.6. The other
  // kernels ask for 1.1 only, and a 1.1 device still runs them under a 1.3 instance.
  const uint32_t instance_api = volkGetInstanceVersion() >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_1;
  app.apiVersion = instance_api;
  VkInstanceCreateInfo instance_info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  instance_info.pApplicationInfo = &app;
  const char* layers[] = {kValidationLayer};
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
  messenger_info.pfnUserCallback = &Device::on_validation_message;
  messenger_info.pUserData = self.get();
  if (validation) {
    instance_info.pNext = &messenger_info;  // also reports what vkCreateInstance and vkDestroyInstance find
    instance_info.enabledLayerCount = 1;
    instance_info.ppEnabledLayerNames = layers;
    instance_info.enabledExtensionCount = 1;
    instance_info.ppEnabledExtensionNames = extensions;
  }
  const VkResult instance_result = vkCreateInstance(&instance_info, nullptr, &self->instance_);
  require(instance_result != VK_ERROR_INCOMPATIBLE_DRIVER, KVC_ERROR_NO_DEVICE,
          "no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)");
  check(instance_result, "vkCreateInstance");
  volkLoadInstance(self->instance_);
  if (validation) {
    // volk's globals follow the most recently loaded instance, and another instance may lack
    // VK_EXT_debug_utils: keep this instance's own entry points.
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(self->instance_, "vkCreateDebugUtilsMessengerEXT"));
    self->destroy_messenger_ = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(self->instance_, "vkDestroyDebugUtilsMessengerEXT"));
    require(create_messenger && self->destroy_messenger_, KVC_ERROR_VULKAN, "VK_EXT_debug_utils entry points missing");
    check(create_messenger(self->instance_, &messenger_info, nullptr, &self->messenger_), "vkCreateDebugUtilsMessengerEXT");
  }

  uint32_t count = 0;
  vkEnumeratePhysicalDevices(self->instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(self->instance_, &count, devices.data());
  std::vector<VkPhysicalDevice> usable;
  for (VkPhysicalDevice candidate : devices) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(candidate, &props);
    if (props.apiVersion >= VK_API_VERSION_1_1 && compute_queue_family(candidate) != UINT32_MAX)
      usable.push_back(candidate);
  }
  require(!usable.empty(), KVC_ERROR_NO_DEVICE, "no Vulkan 1.1 device with a compute queue was found");

  int index = options.device_index;
  const char* env_device = std::getenv("KVC_DEVICE");
  if (index < 0 && env_device && *env_device) index = std::atoi(env_device);
  if (index >= 0) {
    require(static_cast<size_t>(index) < usable.size(), KVC_ERROR_OUT_OF_RANGE,
            "device index " + std::to_string(index) + " is past the " + std::to_string(usable.size()) +
                " usable Vulkan devices");
    self->physical_device_ = usable[index];
  } else {
    self->physical_device_ = *std::min_element(usable.begin(), usable.end(), [](VkPhysicalDevice a, VkPhysicalDevice b) {
      VkPhysicalDeviceProperties pa, pb;
      vkGetPhysicalDeviceProperties(a, &pa);
      vkGetPhysicalDeviceProperties(b, &pb);
      return type_rank(pa.deviceType) < type_rank(pb.deviceType);
    });
  }

  self->queue_family_ = compute_queue_family(self->physical_device_);
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = self->queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  const char* env_coopmat = std::getenv("KVC_COOPERATIVE_MATRIX");
  const bool coopmat_wanted = options.cooperative_matrix && !(env_coopmat && std::strcmp(env_coopmat, "0") == 0);
  CooperativeMatrixSetup coopmat(self->instance_, instance_api, self->physical_device_, coopmat_wanted);
  PipelineStatisticsSetup statistics(self->physical_device_);
  // Batched decode indexes arrays of storage buffers by the cache (attention_decode_batch);
  // a Vulkan 1.0 feature that NVIDIA, AMD, Intel and lavapipe offer, enabled where offered.
  VkPhysicalDeviceFeatures offered{};
  vkGetPhysicalDeviceFeatures(self->physical_device_, &offered);
  VkPhysicalDeviceFeatures enabled{};
  enabled.shaderStorageBufferArrayDynamicIndexing = offered.shaderStorageBufferArrayDynamicIndexing;
  device_info.pEnabledFeatures = &enabled;
  self->indexes_buffer_arrays_ = offered.shaderStorageBufferArrayDynamicIndexing == VK_TRUE;
  self->matrix_path_ = coopmat.path();
  self->matrix_path_detail_ = coopmat.detail();
  self->requires_cooperative_subgroup_size_ = coopmat.requires_subgroup_size();
  // Dispatches push their buffers into the command buffer where the device offers it: a
  // descriptor set allocated and written per dispatch took about 0.7 us of the host's 3.2-3.8
  // us a dispatch on the H100 (docs/benchmarks.md, 2026-11-28, nineteenth session).
  // KVC_PUSH_DESCRIPTORS=0 keeps the pool's sets (what a device without the extension gets),
  // so that tests can take that route anywhere.
  const char* env_push = std::getenv("KVC_PUSH_DESCRIPTORS");
  const bool push_offered = has_extension(self->physical_device_, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) &&
                            !(env_push && std::strcmp(env_push, "0") == 0);
  std::vector<const char*> device_extensions;
  const auto create = [&](bool with_coopmat, bool with_push) {
    device_info.pNext = nullptr;
    device_info.enabledExtensionCount = 0;
    device_info.ppEnabledExtensionNames = nullptr;
    if (with_coopmat) coopmat.enable(device_info);
    statistics.add(device_info);
    if (with_push) {
      device_extensions.assign(device_info.ppEnabledExtensionNames,
                               device_info.ppEnabledExtensionNames + device_info.enabledExtensionCount);
      device_extensions.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
      device_info.enabledExtensionCount = static_cast<uint32_t>(device_extensions.size());
      device_info.ppEnabledExtensionNames = device_extensions.data();
    }
    return vkCreateDevice(self->physical_device_, &device_info, nullptr, &self->device_);
  };
  // A driver that lists an extension but refuses it still gets a device: without push
  // descriptors first (dispatches then bind sets from a pool), then without cooperative
  // matrices (the SIMT kernels), then without either.
  const bool coopmat_path = self->matrix_path_ == MatrixPath::Cooperative;
  bool push_descriptors = push_offered;
  VkResult created = create(coopmat_path, push_descriptors);
  if (created != VK_SUCCESS && push_descriptors) {
    push_descriptors = false;
    created = create(coopmat_path, false);
  }
  if (created != VK_SUCCESS && coopmat_path) {
    self->matrix_path_ = MatrixPath::Simt;
    self->matrix_path_detail_ = std::string("SIMT: vkCreateDevice refused VK_KHR_cooperative_matrix (") + result_name(created) + ")";
    self->requires_cooperative_subgroup_size_ = false;
    push_descriptors = push_offered;
    created = create(false, push_descriptors);
    if (created != VK_SUCCESS && push_descriptors) {
      push_descriptors = false;
      created = create(false, false);
    }
  }
  check(created, "vkCreateDevice");
  if (push_descriptors) {
    VkPhysicalDevicePushDescriptorPropertiesKHR push{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR};
    VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    properties.pNext = &push;
    vkGetPhysicalDeviceProperties2(self->physical_device_, &properties);
    self->max_push_descriptors_ = push.maxPushDescriptors;
  }
  self->captures_pipeline_statistics_ = statistics.wanted();
  vkGetDeviceQueue(self->device_, self->queue_family_, 0, &self->queue_);
  self->finish_setup();
  if (self->matrix_path_ == MatrixPath::Cooperative) {
    // The layout only lets kernels skip shared memory: a probe that fails leaves them the route
    // every device takes, as a driver that refuses the extension leaves the SIMT kernels.
    try {
      self->fragment_layout_ = probe_fragment_layout(*self);
      self->matrix_path_detail_ += std::string(", fragments ") + fragment_layout_name(self->fragment_layout_);
    } catch (const Error& error) {
      if (error.status() == KVC_ERROR_DEVICE_LOST) throw;  // nothing would run on it
      self->matrix_path_detail_ += std::string(", fragments opaque (the probe failed: ") + error.what() + ")";
    }
  }
  return self;
}

std::unique_ptr<Device> Device::wrap(const ExternalHandles& handles) {
  std::lock_guard<std::mutex> lock(volk_mutex());
  load_loader(handles.get_instance_proc_addr);
  std::unique_ptr<Device> self(new Device());
  self->instance_ = handles.instance;
  self->physical_device_ = handles.physical_device;
  self->device_ = handles.device;
  self->queue_ = handles.queue;
  self->queue_family_ = handles.queue_family;
  self->matrix_path_detail_ = "SIMT: an application's VkDevice (which features it enabled is not known)";
  volkLoadInstance(self->instance_);
  self->finish_setup();
  return self;
}

void Device::finish_setup() {
  vkGetPhysicalDeviceProperties(physical_device_, &properties_);
  vkGetPhysicalDeviceMemoryProperties(physical_device_, &memory_properties_);
  reclaimer_ = std::make_unique<Reclaimer>(reuse_budget(memory_properties_));
  destroy_buffer_ = reinterpret_cast<PFN_vkDestroyBuffer>(vkGetDeviceProcAddr(device_, "vkDestroyBuffer"));
  free_memory_ = reinterpret_cast<PFN_vkFreeMemory>(vkGetDeviceProcAddr(device_, "vkFreeMemory"));
  require(destroy_buffer_ && free_memory_, KVC_ERROR_VULKAN, "vkGetDeviceProcAddr found no vkDestroyBuffer or vkFreeMemory");
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maintenance3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceMaintenance4Properties maintenance4{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  subgroup.pNext = &maintenance3;
  const bool vulkan13 = properties_.apiVersion >= VK_API_VERSION_1_3;
  if (vulkan13) maintenance3.pNext = &maintenance4;
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props2.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(physical_device_, &props2);
  subgroup_size_ = subgroup.subgroupSize;
  max_allocation_bytes_ = maintenance3.maxMemoryAllocationSize;
  if (vulkan13) max_allocation_bytes_ = std::min<uint64_t>(max_allocation_bytes_, maintenance4.maxBufferSize);
  // The SIMT kernels use these subgroup operations in compute shaders (Vulkan 1.1 promises only
  // basic ones); NVIDIA, AMD, Intel and lavapipe offer them.
  const VkSubgroupFeatureFlags operations =
      VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  require((subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (subgroup.supportedOperations & operations) == operations,
          KVC_ERROR_UNSUPPORTED, std::string(properties_.deviceName) +
                                     " lacks subgroup basic, shuffle or arithmetic operations in compute shaders, which libkvc's kernels use");
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_device_, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_device_, &count, families.data());
  require(queue_family_ < count, KVC_ERROR_INVALID_ARGUMENT, "queue_family_index is past the device's queue families");
  require(families[queue_family_].queueFlags & VK_QUEUE_COMPUTE_BIT, KVC_ERROR_INVALID_ARGUMENT,
          "the queue's family has no compute support");
  timestamp_valid_bits_ = families[queue_family_].timestampValidBits;
  pipelines_ = std::make_unique<PipelineCache>(*this);
  staging_ = std::make_unique<Staging>(*this);
  // The built-ins only make RoPE cheaper: a probe that fails leaves the exact route.
  try {
    builtin_trig_error_ = vk::builtin_trig_error(read_trig_samples(*this));
  } catch (const Error& error) {
    if (error.status() == KVC_ERROR_DEVICE_LOST) throw;  // nothing would run on it
  }
}

Device::~Device() {
  if (device_) vkDeviceWaitIdle(device_);
  reclaimer_.reset();  // its buffers are this device's
  staging_.reset();
  pipelines_.reset();
  if (!owns_handles_) return;
  if (device_) vkDestroyDevice(device_, nullptr);
  if (messenger_) destroy_messenger_(instance_, messenger_, nullptr);
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

uint32_t Device::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                             VkMemoryPropertyFlags preferred) const {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < memory_properties_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags flags = memory_properties_.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  require(fallback != UINT32_MAX, KVC_ERROR_OUT_OF_MEMORY, "no Vulkan memory type has the required properties");
  return fallback;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Device::on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                             VkDebugUtilsMessageTypeFlagsEXT,
                                                             const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                             void* user) {
  static_cast<Device*>(user)->validation_messages_.fetch_add(1);
  record_validation_message(data && data->pMessage ? data->pMessage : "");
  return VK_FALSE;
}

}  // namespace kvc::vk
