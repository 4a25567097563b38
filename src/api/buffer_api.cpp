// kvc_buffer_*: device memory for an engine's tensors, libkvc's own or an application's VkBuffer.
#include <string>

#include "api/buffer_view.h"
#include "vulkan/buffer.h"
#include "vulkan/device.h"

using kvc::api::guarded;

namespace kvc::api {

uint32_t buffer_offset_alignment(const Backend& backend) {
  // The CPU ops read views as float and int32 arrays: 16 keeps every element aligned, and is
  // what most Vulkan devices ask for too.
  constexpr uint32_t kCpuAlignment = 16;
  return backend.is_cpu() ? kCpuAlignment : static_cast<uint32_t>(backend.device().properties().limits.minStorageBufferOffsetAlignment);
}

View device_view(const kvc_context& context, const kvc_buffer_view& view, uint64_t bytes, const char* what) {
  require(view.buffer != nullptr, KVC_ERROR_NULL_POINTER, [&] { return std::string(what) + ".buffer is NULL"; });
  require(view.buffer->context == &context, KVC_ERROR_INVALID_ARGUMENT,
          [&] { return std::string(what) + ".buffer belongs to another context than the cache's"; });
  const uint32_t alignment = buffer_offset_alignment(*context.backend);
  require(view.offset % alignment == 0, KVC_ERROR_INVALID_ARGUMENT,
          [&] { return std::string(what) + ".offset is " + std::to_string(view.offset) + "; it must be a multiple of " + std::to_string(alignment) +
              " (kvc_context_info.buffer_offset_alignment)"; });
  const uint64_t size = view.buffer->tensor->bytes();
  require(view.offset <= size && bytes <= size - view.offset, KVC_ERROR_BUFFER_TOO_SMALL,
          [&] { return std::string(what) + " needs " + std::to_string(bytes) + " bytes from offset " + std::to_string(view.offset) +
              ", but its buffer holds " + std::to_string(size); });
  return View{view.buffer->tensor.get(), static_cast<size_t>(view.offset)};
}

}  // namespace kvc::api

namespace {

// Runs `body` on a buffer, reporting failures on its context.
template <typename Body>
kvc_status with_buffer(const kvc_buffer* buffer, Body&& body) {
  if (!buffer) return KVC_ERROR_NULL_POINTER;
  return guarded(buffer->context, nullptr, [&] { body(*buffer->context->backend, *buffer->tensor); });
}

void require_range(const kvc::Tensor& tensor, uint64_t offset, uint64_t bytes, const char* call) {
  kvc::require(offset <= tensor.bytes() && bytes <= tensor.bytes() - offset, KVC_ERROR_BUFFER_TOO_SMALL, [&] {
    return std::string(call) + ": " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
           " run past the buffer's " + std::to_string(tensor.bytes());
  });
}

kvc_status adopt(kvc_context* context, std::unique_ptr<kvc::Tensor> tensor, kvc_buffer** out_buffer) {
  auto buffer = std::make_unique<kvc_buffer>();
  buffer->context = context;
  buffer->tensor = std::move(tensor);
  ++context->live_handles;
  *out_buffer = buffer.release();
  return KVC_OK;
}

}  // namespace

extern "C" {

kvc_status kvc_buffer_create(kvc_context* context, uint64_t bytes, kvc_buffer** out_buffer) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] {
    kvc::require(out_buffer != nullptr, KVC_ERROR_NULL_POINTER, "kvc_buffer_create: out_buffer is NULL");
    kvc::require(bytes > 0, KVC_ERROR_INVALID_ARGUMENT, "kvc_buffer_create: bytes is 0");
    kvc::require_within(bytes, context->backend->tensor_limit(), "", [] { return std::string("kvc_buffer_create: the buffer"); });
    adopt(context, std::make_unique<kvc::Tensor>(*context->backend, static_cast<size_t>(bytes)), out_buffer);
  });
}

kvc_status kvc_buffer_wrap_vulkan(kvc_context* context, void* vk_buffer, uint64_t offset, uint64_t bytes, kvc_buffer** out_buffer) {
  if (!context) return KVC_ERROR_NULL_POINTER;
  return guarded(context, nullptr, [&] {
    kvc::require(out_buffer != nullptr && vk_buffer != nullptr, KVC_ERROR_NULL_POINTER,
                 "kvc_buffer_wrap_vulkan: vk_buffer or out_buffer is NULL");
    kvc::Backend& backend = *context->backend;
    kvc::require(!backend.is_cpu() && !backend.device().owns_handles(), KVC_ERROR_UNSUPPORTED,
                 "kvc_buffer_wrap_vulkan needs a context made with kvc_context_create_from_vulkan (the buffer must live on its device)");
    const kvc::SizeLimit limit = backend.tensor_limit();
    kvc::require(bytes > 0 && bytes <= limit.bytes && offset <= UINT64_MAX - bytes, KVC_ERROR_INVALID_ARGUMENT,
                 "kvc_buffer_wrap_vulkan: bytes is " + std::to_string(bytes) + "; it must be 1.." + std::to_string(limit.bytes) + " (" +
                     limit.name + ")");
    const uint32_t alignment = kvc::api::buffer_offset_alignment(backend);
    kvc::require(offset % alignment == 0, KVC_ERROR_INVALID_ARGUMENT,
                 "kvc_buffer_wrap_vulkan: offset " + std::to_string(offset) + " is not a multiple of " + std::to_string(alignment));
    auto borrowed = kvc::vk::Buffer::borrow(backend.device(), reinterpret_cast<VkBuffer>(vk_buffer), offset + bytes);
    adopt(context, std::make_unique<kvc::Tensor>(backend, std::move(borrowed), static_cast<size_t>(offset), static_cast<size_t>(bytes)),
          out_buffer);
  });
}

void kvc_buffer_destroy(kvc_buffer* buffer) {
  if (!buffer) return;
  kvc_context* context = buffer->context;
  delete buffer;  // recorded work still using its memory keeps it (Backend::release)
  kvc::api::release_context_reference(context);
}

kvc_status kvc_buffer_size(const kvc_buffer* buffer, uint64_t* out_bytes) {
  return with_buffer(buffer, [&](kvc::Backend&, kvc::Tensor& tensor) {
    kvc::require(out_bytes != nullptr, KVC_ERROR_NULL_POINTER, "kvc_buffer_size: out_bytes is NULL");
    *out_bytes = tensor.bytes();
  });
}

kvc_status kvc_buffer_write(kvc_buffer* buffer, uint64_t offset, uint64_t bytes, const void* src) {
  return with_buffer(buffer, [&](kvc::Backend& backend, kvc::Tensor& tensor) {
    kvc::require(src != nullptr, KVC_ERROR_NULL_POINTER, "kvc_buffer_write: src is NULL");
    require_range(tensor, offset, bytes, "kvc_buffer_write");
    backend.begin();
    backend.upload(src, static_cast<size_t>(bytes), tensor, static_cast<size_t>(offset));
    backend.submit();
  });
}

kvc_status kvc_buffer_read(kvc_buffer* buffer, uint64_t offset, uint64_t bytes, void* dst) {
  return with_buffer(buffer, [&](kvc::Backend& backend, kvc::Tensor& tensor) {
    kvc::require(dst != nullptr, KVC_ERROR_NULL_POINTER, "kvc_buffer_read: dst is NULL");
    require_range(tensor, offset, bytes, "kvc_buffer_read");
    kvc::require(!backend.in_external_step(), KVC_ERROR_BAD_STATE,
                 "kvc_buffer_read writes host memory, which a step recorded into the application's command buffer cannot; "
                 "read after the application's command buffer completed, outside the step");
    backend.begin();
    backend.download(tensor, static_cast<size_t>(offset), dst, static_cast<size_t>(bytes));
    backend.submit();
  });
}

}  // extern "C"
