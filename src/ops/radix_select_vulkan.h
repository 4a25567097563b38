// Workgroup size of the kernels built on shaders/include/radix_select.glsl (top_k,
// window_hit_threshold): one workgroup per row, and a selection's rows are few (the kv heads of a
// layer, or a layer's window rows), so a row's passes are bound by how many loads its threads
// keep in flight: the most threads the device gives, up to 1024.
#pragma once

#include <cstdint>
#include <string>

#include "common/error.h"
#include "vulkan/device.h"

namespace kvc::ops {

inline uint32_t radix_select_workgroup(const vk::Device& device, const char* kernel) {
  constexpr uint32_t kMax = 1024, kMin = 256;  // kMin: at most 8 of the 2048 radix bins a thread
  // workgroup_scan.glsl's word a thread, the histogram's 2048 words and a few more.
  auto shared_bytes = [](uint32_t threads) { return uint64_t(threads) * 4 + 8192 + 64; };
  uint32_t size = kMax;
  while (size > kMin && !device.fits_workgroup(size, shared_bytes(size))) size /= 2;
  require(device.fits_workgroup(size, shared_bytes(size)), KVC_ERROR_UNSUPPORTED, [&] {
    return std::string(kernel) + " needs workgroups of " + std::to_string(kMin) + " threads, more than the device allows";
  });
  return size;
}

}  // namespace kvc::ops
