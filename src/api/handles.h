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
  uint32_t live_caches = 0;
  bool destroy_requested = false;  // kvc_context_destroy ran while caches were alive
};

struct kvc_cache {
  kvc_context* context = nullptr;
  std::unique_ptr<kvc::Cache> cache;
};

namespace kvc::api {

// Runs `body`; on failure records the message (on `context` when there is one, else in
// `fallback`) and returns the status.
template <typename Body>
kvc_status guarded(kvc_context* context, std::string* fallback, Body&& body) {
  std::string* sink = context ? &context->last_error : fallback;
  try {
    body();
    return KVC_OK;
  } catch (const Error& error) {
    if (sink) *sink = error.what();
    return error.status();
  } catch (const std::bad_alloc&) {
    if (sink) *sink = "out of host memory";
    return KVC_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& error) {
    if (sink) *sink = std::string("internal error: ") + error.what();
    return KVC_ERROR_INTERNAL;
  } catch (...) {
    if (sink) *sink = "internal error: unknown exception";
    return KVC_ERROR_INTERNAL;
  }
}

// Throws KVC_ERROR_INVALID_ARGUMENT unless a descriptor's struct_size covers `needed` bytes.
inline void require_struct_size(uint32_t struct_size, size_t needed, const char* type) {
  require(struct_size >= needed, KVC_ERROR_INVALID_ARGUMENT,
          std::string(type) + ".struct_size is " + std::to_string(struct_size) + "; set it to sizeof(" + type + ")");
}

}  // namespace kvc::api
