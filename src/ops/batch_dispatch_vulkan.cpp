#include "ops/batch_dispatch_vulkan.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "vulkan/device.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kMaxCachesPerDispatch = 32;

bool forced_per_cache() {
  const char* setting = std::getenv("KVC_BATCH_DECODE");
  return setting && std::strcmp(setting, "per_cache") == 0;
}

}  // namespace

uint32_t batch_caches_per_dispatch(Backend& backend, uint32_t arrays, uint32_t singles) {
  if (backend.is_cpu()) return 0;
  const vk::Device& device = backend.device();
  if (!device.indexes_buffer_arrays() || forced_per_cache()) return 0;
  const VkPhysicalDeviceLimits& limits = device.properties().limits;
  const uint32_t descriptors =
      std::min({limits.maxPerStageDescriptorStorageBuffers, limits.maxDescriptorSetStorageBuffers, limits.maxPerStageResources});
  const uint32_t fit = descriptors > singles ? (descriptors - singles) / arrays : 0;
  const uint32_t caches = std::min(kMaxCachesPerDispatch, fit);
  return caches >= 2 ? caches : 0;
}

std::vector<std::vector<size_t>> dispatch_groups(const std::vector<size_t>& members, uint32_t per_dispatch) {
  const size_t size = std::max<uint32_t>(per_dispatch, 1);
  std::vector<std::vector<size_t>> groups;
  for (size_t first = 0; first < members.size(); first += size)
    groups.emplace_back(members.begin() + first, members.begin() + std::min(members.size(), first + size));
  return groups;
}

}  // namespace kvc::ops
