// kvc_context_*: backend choice, wrapping an application's Vulkan device, info, last error.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "api/buffer_view.h"
#include "api/handles.h"
#include "vulkan/device.h"

using kvc::api::guarded;

namespace {

thread_local std::string create_error;

void destroy_now(kvc_context* context) { delete context; }

}  // namespace

extern "C" {

kvc_context_desc kvc_context_desc_default(void) {
  kvc_context_desc desc{};
  desc.struct_size = sizeof(kvc_context_desc);
  desc.backend = KVC_BACKEND_AUTO;
  desc.device_index = -1;
  return desc;
}

kvc_status kvc_context_create(const kvc_context_desc* desc, kvc_context** out_context) {
  return guarded(nullptr, &create_error, [&] {
    kvc::require(desc != nullptr && out_context != nullptr, KVC_ERROR_NULL_POINTER,
                 "kvc_context_create: desc or out_context is NULL");
    kvc::api::require_struct_size(desc->struct_size, sizeof(kvc_context_desc), "kvc_context_desc");
    kvc::require(desc->backend == KVC_BACKEND_AUTO || desc->backend == KVC_BACKEND_VULKAN || desc->backend == KVC_BACKEND_CPU,
                 KVC_ERROR_INVALID_ARGUMENT, "backend " + std::to_string(desc->backend) + " is not a kvc_backend");
    auto context = std::make_unique<kvc_context>();
    if (desc->backend == KVC_BACKEND_CPU) {
      context->backend = kvc::Backend::make_cpu();
    } else {
      kvc::vk::DeviceOptions options;
      options.validation = (desc->flags & KVC_CONTEXT_VALIDATION) != 0;
      options.cooperative_matrix = (desc->flags & KVC_CONTEXT_NO_COOPERATIVE_MATRIX) == 0;
      options.device_index = desc->device_index;
      try {
        context->backend = kvc::Backend::make_vulkan(kvc::vk::Device::create(options));
      } catch (const kvc::Error& error) {
        const bool no_vulkan = error.status() == KVC_ERROR_NO_VULKAN_LOADER || error.status() == KVC_ERROR_NO_DEVICE;
        if (desc->backend == KVC_BACKEND_VULKAN || !no_vulkan) throw;
        context->backend = kvc::Backend::make_cpu();  // AUTO: no Vulkan here, run on the CPU
      }
    }
    *out_context = context.release();
  });
}

kvc_status kvc_context_create_from_vulkan(const kvc_vulkan_handles* handles, kvc_context** out_context) {
  return guarded(nullptr, &create_error, [&] {
    kvc::require(handles != nullptr && out_context != nullptr, KVC_ERROR_NULL_POINTER,
                 "kvc_context_create_from_vulkan: handles or out_context is NULL");
    kvc::api::require_struct_size(handles->struct_size, sizeof(kvc_vulkan_handles), "kvc_vulkan_handles");
    kvc::require(handles->instance && handles->physical_device && handles->device && handles->queue,
                 KVC_ERROR_NULL_POINTER, "kvc_vulkan_handles: instance, physical_device, device and queue are required");
    kvc::vk::ExternalHandles external;
    external.instance = static_cast<VkInstance>(handles->instance);
    external.physical_device = static_cast<VkPhysicalDevice>(handles->physical_device);
    external.device = static_cast<VkDevice>(handles->device);
    external.queue = static_cast<VkQueue>(handles->queue);
    external.queue_family = handles->queue_family_index;
    external.get_instance_proc_addr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(handles->get_instance_proc_addr);
    auto context = std::make_unique<kvc_context>();
    context->backend = kvc::Backend::make_vulkan(kvc::vk::Device::wrap(external));
    *out_context = context.release();
  });
}

void kvc_context_destroy(kvc_context* context) {
  if (!context) return;
  // Caches still alive keep the context; the last kvc_cache_destroy frees it.
  if (context->live_handles > 0) context->destroy_requested = true;
  else destroy_now(context);
}

const char* kvc_context_last_error(const kvc_context* context) {
  return context ? context->last_error.c_str() : "kvc_context_last_error: context is NULL";
}

const char* kvc_last_create_error(void) { return create_error.c_str(); }

kvc_status kvc_context_info_get(kvc_context* context, kvc_context_info* info) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] {
    kvc::require(info != nullptr, KVC_ERROR_NULL_POINTER, "kvc_context_info_get: info is NULL");
    // 0.1's struct ended before buffer_offset_alignment: such a caller gets what it has room for.
    kvc::api::require_struct_size(info->struct_size, offsetof(kvc_context_info, buffer_offset_alignment), "kvc_context_info");
    kvc_context_info result{};
    result.struct_size = info->struct_size;
    const kvc::Backend& backend = *context->backend;
    result.backend = backend.is_cpu() ? KVC_BACKEND_CPU : KVC_BACKEND_VULKAN;
    std::strncpy(result.device_name, backend.device_name().c_str(), sizeof(result.device_name) - 1);
    result.buffer_offset_alignment = kvc::api::buffer_offset_alignment(backend);
    result.matrix_path = KVC_MATRIX_PATH_SIMT;
    std::strncpy(result.matrix_path_detail, "SIMT: the CPU backend", sizeof(result.matrix_path_detail) - 1);
    if (!backend.is_cpu()) {
      const kvc::vk::Device& device = backend.device();
      result.vendor_id = device.properties().vendorID;
      result.validation_messages = device.validation_messages();
      result.matrix_path = static_cast<kvc_matrix_path>(device.matrix_path());
      std::strncpy(result.matrix_path_detail, device.matrix_path_detail().c_str(), sizeof(result.matrix_path_detail) - 1);
    }
    result.work_bytes_held = backend.work_bytes_held();
    std::memcpy(info, &result, std::min<size_t>(info->struct_size, sizeof(result)));
  });
}

kvc_status kvc_context_trim(kvc_context* context) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] {
    kvc::require(!context->backend->in_step(), KVC_ERROR_BAD_STATE, "kvc_context_trim: a step is open; end it first");
    context->backend->trim_work_memory();
  });
}

}  // extern "C"

namespace kvc::api {

void release_context_reference(kvc_context* context) {
  if (--context->live_handles == 0 && context->destroy_requested) destroy_now(context);
}
}  // namespace kvc::api
