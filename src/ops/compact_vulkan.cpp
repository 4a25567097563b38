#include "ops/compact.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;  // threads, each moving one 32-bit word

struct CompactPush {
  uint32_t slot_stride, out_slot_stride, num_selected, index_stride, tail_first, kept_slots;
};

}  // namespace

void compact_vulkan(Backend& backend, const CompactShape& shape, const CompactArgs& args) {
  // Rows move as 32-bit words: head_dim is a multiple of 8, so an f16 row is whole words too.
  const uint32_t row_words = shape.head_dim * uint32_t(dtype_size(shape.dtype)) / 4;
  const uint32_t kept = shape.num_selected + shape.tail_length;
  const CompactPush push{shape.slot_stride, shape.out_slot_stride, shape.num_selected, shape.index_stride, shape.tail_first, kept};
  backend.recorder().dispatch({"compact", 7, sizeof(CompactPush), {kWorkgroupSize, row_words}},
                              {slice(args.indices), slice(args.k), slice(args.v), slice(args.positions), slice(args.k_out),
                               slice(args.v_out), slice(args.positions_out)},
                              &push, group_count(uint64_t(kept) * (row_words + 1), kWorkgroupSize), shape.num_kv_heads);
}

}  // namespace kvc::ops
