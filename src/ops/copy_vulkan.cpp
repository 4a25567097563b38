#include <algorithm>

#include "ops/copy.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {

namespace {
constexpr uint32_t kWorkgroupSize = 256;
constexpr uint32_t kMaxGroups = 4096;  // enough to saturate any GPU; the rest is the grid-stride loop
}  // namespace

void copy_vulkan(Backend& backend, const CopyArgs& args) {
  const uint32_t vectors = static_cast<uint32_t>(args.bytes / 16);
  backend.recorder().dispatch({"copy", 2, sizeof(uint32_t), {kWorkgroupSize}},
                              {args.src.tensor->slice(args.src.offset, args.bytes), args.dst.tensor->slice(args.dst.offset, args.bytes)},
                              &vectors, std::max(1u, std::min(group_count_unbounded(vectors, kWorkgroupSize), kMaxGroups)));
}

}  // namespace kvc::ops
