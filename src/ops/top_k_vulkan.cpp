// One workgroup per row: a radix select (four 8-bit histogram passes) finds the k-th largest
// key and how many keys equal to it to take, then one ordered pass writes the selection.
#include <string>

#include "ops/top_k.h"
#include "ops/vulkan_args.h"
#include "vulkan/device.h"

namespace kvc::ops {
namespace {

// Threads per row: a row is one workgroup, and the selections of a step are few rows (the kv
// heads of one layer), so a row's passes are bound by how many loads its threads keep in
// flight: the most threads the device gives, up to 1024.
constexpr uint32_t kMaxWorkgroup = 1024, kMinWorkgroup = 256;  // kMinWorkgroup: a thread per radix bin
constexpr uint32_t kRunLength = 8;  // consecutive positions per thread in the write pass
constexpr uint32_t kSharedBytesPerThread = 4;  // workgroup_scan.glsl's

uint64_t shared_bytes(uint32_t threads) { return uint64_t(threads) * kSharedBytesPerThread + 1024 + 64; }

uint32_t workgroup_size(const vk::Device& device) {
  uint32_t size = kMaxWorkgroup;
  while (size > kMinWorkgroup && !device.fits_workgroup(size, shared_bytes(size))) size /= 2;
  require(device.fits_workgroup(size, shared_bytes(size)), KVC_ERROR_UNSUPPORTED,
          "top_k needs workgroups of " + std::to_string(kMinWorkgroup) + " threads, more than the device allows");
  return size;
}

struct TopKPush {
  uint32_t row_length, row_stride, k, index_stride, priority_min;
};

}  // namespace

void top_k_vulkan(Backend& backend, const TopKShape& shape, const TopKArgs& args) {
  if (shape.num_rows == 0 || shape.k == 0) return;
  const TopKPush push{shape.row_length, shape.row_stride, shape.k, shape.index_stride, shape.priority_min};
  const bool has_priority = static_cast<bool>(args.priority);
  backend.recorder().dispatch({"top_k", 3, sizeof(TopKPush), {workgroup_size(backend.device()), kRunLength, has_priority}},
                              {slice(args.scores), slice_or(args.priority, args.scores), slice(args.indices)}, &push,
                              shape.num_rows);
}

}  // namespace kvc::ops
