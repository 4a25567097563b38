#include "kvc/kvc.h"

#define KVC_STRINGIFY2(x) #x
#define KVC_STRINGIFY(x) KVC_STRINGIFY2(x)

extern "C" {

uint32_t kvc_version_number(void) { return KVC_VERSION_NUMBER; }

const char* kvc_version_string(void) {
  return KVC_STRINGIFY(KVC_VERSION_MAJOR) "." KVC_STRINGIFY(KVC_VERSION_MINOR) "." KVC_STRINGIFY(KVC_VERSION_PATCH);
}

const char* kvc_status_name(kvc_status status) {
  switch (status) {
    case KVC_OK: return "KVC_OK";
    case KVC_ERROR_INVALID_ARGUMENT: return "KVC_ERROR_INVALID_ARGUMENT";
    case KVC_ERROR_NULL_POINTER: return "KVC_ERROR_NULL_POINTER";
    case KVC_ERROR_OUT_OF_RANGE: return "KVC_ERROR_OUT_OF_RANGE";
    case KVC_ERROR_DTYPE_MISMATCH: return "KVC_ERROR_DTYPE_MISMATCH";
    case KVC_ERROR_NOT_FINITE: return "KVC_ERROR_NOT_FINITE";
    case KVC_ERROR_BAD_STATE: return "KVC_ERROR_BAD_STATE";
    case KVC_ERROR_CAPACITY: return "KVC_ERROR_CAPACITY";
    case KVC_ERROR_BUFFER_TOO_SMALL: return "KVC_ERROR_BUFFER_TOO_SMALL";
    case KVC_ERROR_NO_VULKAN_LOADER: return "KVC_ERROR_NO_VULKAN_LOADER";
    case KVC_ERROR_NO_DEVICE: return "KVC_ERROR_NO_DEVICE";
    case KVC_ERROR_VULKAN: return "KVC_ERROR_VULKAN";
    case KVC_ERROR_OUT_OF_MEMORY: return "KVC_ERROR_OUT_OF_MEMORY";
    case KVC_ERROR_UNSUPPORTED: return "KVC_ERROR_UNSUPPORTED";
    case KVC_ERROR_INTERNAL: return "KVC_ERROR_INTERNAL";
    case KVC_TIMEOUT: return "KVC_TIMEOUT";
    case KVC_ERROR_DEVICE_LOST: return "KVC_ERROR_DEVICE_LOST";
    default: break;
  }
  return "KVC_ERROR_(unknown status)";
}

}  // extern "C"
