// What the C API's opaque handles hold, and the one wrapper every entry point runs its body
// in: exceptions become a kvc_status plus the context's last-error message.
#pragma once

#include <memory>
#include <new>
#include <string>

#include "backend/backend.h"
#include "cache/cache.h"

struct kvc_context {
  std::unique_ptr<kvc::Backend> backend;
  std::string last_error;
  uint32_t live_handles = 0;       // caches and buffers made on it
  bool destroy_requested = false;  // kvc_context_destroy ran while caches or buffers were alive
};

struct kvc_cache {
  kvc_context* context = nullptr;
  std::unique_ptr<kvc::Cache> cache;
};

struct kvc_buffer {
  kvc_context* context = nullptr;
  std::unique_ptr<kvc::Tensor> tensor;
};

namespace kvc::api {

// Runs `body`; on failure drops the work it had begun to record (restoring what it changed),
// records the message (on `context` when there is one, else in `fallback`) and returns the
// status. A context whose device was lost runs nothing more.
template <typename Body>
kvc_status guarded(kvc_context* context, std::string* fallback, Body&& body) {
  std::string* sink = context ? &context->last_error : fallback;
  Backend* backend = context ? context->backend.get() : nullptr;
  const auto fail = [&](kvc_status status, const std::string& message) {
    if (backend) backend->abandon(status);
    if (backend && status == KVC_ERROR_DEVICE_LOST) backend->mark_device_lost();
    if (sink) *sink = message;
    return status;
  };
  if (backend && backend->device_lost()) {
    *sink = "the context's Vulkan device was lost (VK_ERROR_DEVICE_LOST) in an earlier call: it runs nothing more; destroy its "
            "caches, buffers and the context, and create a new one";
    return KVC_ERROR_DEVICE_LOST;
  }
  try {
    body();
    return KVC_OK;
  } catch (const Error& error) {
    return fail(error.status(), error.what());
  } catch (const std::bad_alloc&) {
    return fail(KVC_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& error) {
    return fail(KVC_ERROR_INTERNAL, std::string("internal error: ") + error.what());
  } catch (...) {
    return fail(KVC_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

// Throws KVC_ERROR_BAD_STATE when a step is open on the context: `call` must run alone.
inline void require_no_step(const kvc_context& context, const char* call) {
  require(!context.backend->in_step(), KVC_ERROR_BAD_STATE,
          std::string(call) + " cannot run inside a step: call it before kvc_step_begin or after kvc_step_end");
}

// Lets go of one of the context's caches or buffers; frees a context whose destroy waited.
void release_context_reference(kvc_context* context);

// Throws KVC_ERROR_INVALID_ARGUMENT unless a descriptor's struct_size covers `needed` bytes.
inline void require_struct_size(uint32_t struct_size, size_t needed, const char* type) {
  require(struct_size >= needed, KVC_ERROR_INVALID_ARGUMENT,
          std::string(type) + ".struct_size is " + std::to_string(struct_size) + "; set it to sizeof(" + type + ")");
}

}  // namespace kvc::api
