// kvc_step_*: many calls recorded into one submission (see kvc.h, "steps").
#include "api/handles.h"
#include "vulkan/device.h"

using kvc::api::guarded;

extern "C" {

kvc_status kvc_step_begin(kvc_context* context) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] { context->backend->begin_step(nullptr); });
}

kvc_status kvc_step_begin_commands(kvc_context* context, void* command_buffer) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] {
    kvc::require(command_buffer != nullptr, KVC_ERROR_NULL_POINTER, "kvc_step_begin_commands: command_buffer is NULL");
    const kvc::Backend& backend = *context->backend;
    kvc::require(!backend.is_cpu() && !backend.device().owns_handles(), KVC_ERROR_UNSUPPORTED,
                 "kvc_step_begin_commands records into the application's command buffer, so it needs a context over the "
                 "application's device (kvc_context_create_from_vulkan)");
    context->backend->begin_step(command_buffer);
  });
}

kvc_status kvc_step_end(kvc_context* context) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] { context->backend->end_step(); });
}

kvc_status kvc_step_wait(kvc_context* context, uint64_t timeout_ns) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  bool finished = false;
  const kvc_status status = guarded(context, nullptr, [&] {
    kvc::require(!context->backend->in_step(), KVC_ERROR_BAD_STATE, "kvc_step_wait inside an open step: end it with kvc_step_end first");
    finished = context->backend->wait_step(timeout_ns);
  });
  return status == KVC_OK && !finished ? KVC_TIMEOUT : status;
}

}  // extern "C"
