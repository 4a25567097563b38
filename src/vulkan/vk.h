// The one place that includes Vulkan: through volk, so libkvc never links libvulkan and
// loads it at run time instead.
#pragma once

#include <string>

#include <volk.h>

#include "common/error.h"

namespace kvc::vk {

const char* result_name(VkResult result);

// Throws Error(KVC_ERROR_VULKAN, KVC_ERROR_OUT_OF_MEMORY or KVC_ERROR_DEVICE_LOST) naming `what`
// unless result is VK_SUCCESS.
void check(VkResult result, const char* what);

// Whether `physical_device` lists the device extension `name`.
bool has_extension(VkPhysicalDevice physical_device, const char* name);

}  // namespace kvc::vk
