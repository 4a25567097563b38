// Counts are zeroed, then one thread per named index adds 1 atomically: integer adds
// commute, so the result does not depend on the order the GPU runs them in.
#include "ops/hit_count.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kWorkgroupSize = 256;

struct HitCountPush {
  uint32_t rows_per_kv_head, hits_per_row, index_stride, num_keys;
};

}  // namespace

void hit_count_vulkan(Backend& backend, const HitCountShape& shape, const HitCountArgs& args) {
  vk::Recorder& recorder = backend.recorder();
  recorder.fill(slice(args.counts), uint64_t(shape.num_kv_heads) * shape.num_keys * 4, 0u);
  const HitCountPush push{shape.rows_per_kv_head, shape.hits_per_row, shape.index_stride, shape.num_keys};
  recorder.dispatch({"hit_count", 2, sizeof(HitCountPush), {kWorkgroupSize}}, {slice(args.indices), slice(args.counts)}, &push,
                    group_count(shape.hits_per_row, kWorkgroupSize), shape.rows_per_kv_head, shape.num_kv_heads);
}

}  // namespace kvc::ops
