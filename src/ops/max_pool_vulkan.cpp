#include "ops/max_pool.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;

struct MaxPoolPush {
  uint32_t row_length, radius;
};

}  // namespace

void max_pool_vulkan(Backend& backend, const MaxPoolShape& shape, const MaxPoolArgs& args) {
  const MaxPoolPush push{shape.row_length, shape.kernel_size / 2};
  backend.recorder().dispatch({"max_pool", 2, sizeof(MaxPoolPush), {kWorkgroupSize}}, {slice(args.in), slice(args.out)}, &push,
                              group_count(shape.row_length, kWorkgroupSize), shape.num_rows);
}

}  // namespace kvc::ops
