// Copies bytes between tensors with a compute shader (16 bytes per thread and step): the
// bandwidth ceiling kvc-bench measures, and a copy that can run inside any op sequence.
#pragma once

#include <cstddef>

#include "backend/backend.h"

namespace kvc::ops {

// `bytes` is a multiple of 16, at most 64 GiB.
struct CopyArgs {
  View src;
  View dst;
  size_t bytes = 0;
};

void copy(Backend& backend, const CopyArgs& args);
void copy_cpu(const CopyArgs& args);
void copy_vulkan(Backend& backend, const CopyArgs& args);

}  // namespace kvc::ops
