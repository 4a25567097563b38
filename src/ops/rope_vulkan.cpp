#include <algorithm>

#include "common/error.h"
#include "ops/rope.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {

namespace {
struct RopePush {
  uint32_t num_rows;
  uint32_t num_heads;
  float out_scale;
  uint32_t positions_first;
  uint32_t in_first;
};
constexpr uint32_t kWorkgroupSize = 128;
}  // namespace

void rope_vulkan(Backend& backend, const RopeShape& shape, const RopeArgs& args) {
  const uint32_t rotary_dims = shape.rope.enabled() ? shape.rope.rotary_dims : 0;
  const vk::KernelSpec spec{"rope", 4, sizeof(RopePush),
                            {kWorkgroupSize, shape.head_dim, shape.dtype == Dtype::F16,
                             rope_style_constant(shape.rope), rotary_dims, shape.out_dtype == Dtype::F16}};
  // Positions and the input bind from their tensors' start (a descriptor offset must be aligned,
  // and a kv head's keys in a cache need not be); push constants say where each begins.
  const View positions = args.positions ? View{args.positions.tensor, 0} : args.out;
  const size_t element = dtype_size(shape.dtype);
  require(args.in.offset % (4 * element) == 0, KVC_ERROR_INTERNAL, "rope: the input starts inside a 4-element group");
  const RopePush push{shape.num_tokens * shape.num_heads, shape.num_heads, shape.out_scale,
                      static_cast<uint32_t>(args.positions.offset / sizeof(int32_t)), static_cast<uint32_t>(args.in.offset / element)};
  // As the shader's kItemsPerRow.
  const uint64_t items_per_row = shape.out_dtype == Dtype::F16 ? shape.head_dim / 4 : rotary_dims / 2 + shape.head_dim - rotary_dims;
  const uint64_t items = uint64_t(push.num_rows) * items_per_row;
  backend.recorder().dispatch(spec,
                              {slice(View{args.in.tensor, 0}), slice(positions), slice_or(args.turn_table, args.out), slice(args.out)},
                              &push, std::min<uint32_t>(group_count_unbounded(items, kWorkgroupSize), 65535u));
}

}  // namespace kvc::ops
