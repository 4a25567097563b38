#include <algorithm>

#include "ops/append_rows.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;  // threads, each moving one 32-bit word at a time
constexpr uint32_t kMaxGroups = 65535;    // the least maxComputeWorkGroupCount[0]; the shader loops past it

struct AppendRowsPush {
  uint32_t slot_stride, first_slot, num_tokens, num_kv_heads;
  int32_t first_position;
  uint32_t source_token;
};

}  // namespace

void append_rows_vulkan(Backend& backend, const AppendRowsShape& shape, const AppendRowsArgs& args) {
  const uint32_t row_words = shape.head_dim * uint32_t(dtype_size(shape.dtype)) / 4;
  const AppendRowsPush push{shape.slot_stride, shape.first_slot, shape.num_tokens, shape.num_kv_heads, shape.first_position, shape.source_token};
  const uint32_t rope_style = rope_style_constant(shape.rope);
  const bool f16 = shape.dtype == Dtype::F16;
  backend.recorder().dispatch({"append_rows", 6, sizeof(AppendRowsPush),
                               {kWorkgroupSize, row_words, f16, rope_style, rope_style ? shape.rope.rotary_dims : 0u}},
                              {slice(args.k), slice(args.v), slice(args.k_cache), slice(args.v_cache), slice(args.positions),
                               slice(rope_style ? args.turn_table : args.positions)},
                              &push, std::min(group_count_unbounded(uint64_t(shape.num_tokens) * (row_words + 1), kWorkgroupSize), kMaxGroups),
                              shape.num_kv_heads);
}

}  // namespace kvc::ops
