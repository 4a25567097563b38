// What append_rows and append_rows_batch share on Vulkan (shaders/include/append_row.glsl's
// kernels): the workgroup, the specialization constants and the workgroups a chunk takes; used
// by the ops' Vulkan implementations only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/append_rows.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {

constexpr uint32_t kAppendWorkgroup = 256;  // threads, each moving one 32-bit word at a time
constexpr uint32_t kAppendMaxGroups = 65535;  // the least maxComputeWorkGroupCount[0]; the kernels loop past it

// 32-bit words of one K or V row.
inline uint32_t append_row_words(const AppendRowsShape& shape) { return shape.head_dim * uint32_t(dtype_size(shape.dtype)) / 4; }

// Specialization constants 0..4 of both kernels: workgroup, row words, f16, and the RoPE of
// keys stored rotated (style 0: none).
inline std::vector<uint32_t> append_row_constants(const AppendRowsShape& shape) {
  const uint32_t rope_style = rope_style_constant(shape.rope);
  return {kAppendWorkgroup, append_row_words(shape), shape.dtype == Dtype::F16, rope_style, rope_style ? shape.rope.rotary_dims : 0u};
}

// Workgroups along x for a chunk: an item per token and word of its row, plus its position.
inline uint32_t append_row_groups(const AppendRowsShape& shape) {
  return std::min(group_count_unbounded(uint64_t(shape.num_tokens) * (append_row_words(shape) + 1), kAppendWorkgroup), kAppendMaxGroups);
}

}  // namespace kvc::ops
