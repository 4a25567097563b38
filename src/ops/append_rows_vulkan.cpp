#include "ops/append_rows_vulkan.h"

namespace kvc::ops {
namespace {

struct AppendRowsPush {
  uint32_t slot_stride, first_slot, num_tokens, num_kv_heads;
  int32_t first_position;
  uint32_t source_token;
};

}  // namespace

void append_rows_vulkan(Backend& backend, const AppendRowsShape& shape, const AppendRowsArgs& args) {
  const AppendRowsPush push{shape.slot_stride, shape.first_slot, shape.num_tokens, shape.num_kv_heads, shape.first_position, shape.source_token};
  backend.recorder().dispatch({"append_rows", 6, sizeof(AppendRowsPush), append_row_constants(shape)},
                              {slice(args.k), slice(args.v), slice(args.k_cache), slice(args.v_cache), slice(args.positions),
                               slice(shape.rope.enabled() ? args.turn_table : args.positions)},
                              &push, append_row_groups(shape), shape.num_kv_heads);
}

}  // namespace kvc::ops
