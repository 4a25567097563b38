// Turning op operands (Views) into Vulkan bindings; used by the ops' Vulkan implementations only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "vulkan/buffer.h"
#include "vulkan/recorder.h"

namespace kvc::ops {

// The rest of the view's tensor, from its offset.
inline vk::BufferSlice slice(const View& view) {
  return view.tensor->slice(view.offset, view.tensor->bytes() - view.offset);
}

// An optional operand: when absent, bind `stand_in` so the descriptor is valid; the kernel
// is told (by a constant or push value) not to touch it.
inline vk::BufferSlice slice_or(const View& view, const View& stand_in) {
  return view ? slice(view) : slice(stand_in);
}

// Workgroups to cover `items`, for kernels that loop over whatever one dispatch cannot reach.
inline uint32_t group_count_unbounded(uint64_t items, uint32_t group_size) {
  return static_cast<uint32_t>(std::min<uint64_t>((items + group_size - 1) / group_size, UINT32_MAX));
}

inline uint32_t group_count(uint64_t items, uint32_t group_size) {
  const uint64_t groups = (items + group_size - 1) / group_size;
  // 65535 is the smallest maxComputeWorkGroupCount[0] Vulkan allows.
  require(groups <= 65535u, KVC_ERROR_CAPACITY, [&] {
    return "dispatch of " + std::to_string(groups) + " workgroups exceeds 65535";
  });
  return static_cast<uint32_t>(groups);
}

}  // namespace kvc::ops
