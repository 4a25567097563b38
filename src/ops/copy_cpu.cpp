#include <cstring>

#include "ops/copy.h"

namespace kvc::ops {

void copy_cpu(const CopyArgs& args) { std::memmove(args.dst.host<void>(), args.src.host<void>(), args.bytes); }

void copy(Backend& backend, const CopyArgs& args) {
  require(args.bytes % 16 == 0, KVC_ERROR_INTERNAL, "copy: bytes must be a multiple of 16");
  if (backend.is_cpu()) copy_cpu(args);
  else copy_vulkan(backend, args);
}

}  // namespace kvc::ops
