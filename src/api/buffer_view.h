// Turning the C API's kvc_buffer_view into an op operand, with every check the header promises.
#pragma once

#include <cstdint>

#include "api/handles.h"

namespace kvc::api {

// The alignment kvc_buffer_view offsets keep on this backend (1 on the CPU): shaders bind
// views directly, so a view starts where a storage-buffer binding may.
uint32_t buffer_offset_alignment(const Backend& backend);

// `bytes` of `view` as a View on the context's backend. Throws KVC_ERROR_NULL_POINTER (no
// buffer), KVC_ERROR_INVALID_ARGUMENT (a buffer of another context, an unaligned offset) or
// KVC_ERROR_BUFFER_TOO_SMALL (the tensor runs past the buffer), naming `what`.
View device_view(const kvc_context& context, const kvc_buffer_view& view, uint64_t bytes, const char* what);

}  // namespace kvc::api
