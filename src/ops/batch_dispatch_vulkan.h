// What the batched kernels (attention_decode_batch, append_rows_batch, and over a cache's layers
// eviction_scores_layers and evict_one_layers) share on the host: how many caches (or layers)
// one dispatch binds, which go together, and their binding arrays. A cache's
// buffers are elements of the kernels' binding arrays (one descriptor set per dispatch, no
// copies): buffer device addresses would need a usage flag on every buffer, applications'
// included, and a Vulkan 1.2 feature, while arrays of storage buffers indexed by a dynamically
// uniform value are Vulkan 1.0 (shaderStorageBufferArrayDynamicIndexing), and the per-stage
// descriptor limit only decides how many caches one dispatch takes. Used by the ops' Vulkan
// implementations only.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "backend/backend.h"
#include "vulkan/buffer.h"

namespace kvc::ops {

// Caches one dispatch of a batched kernel binds on this backend, each taking `arrays` bindings
// of the kernel's binding arrays beside `singles` bindings of one buffer: what the device's
// descriptor limits allow, at most 32 (the batch an engine step of issue 15 runs, and a
// model's layers; 6 x 32 + 3 descriptors a set stays far inside the recorder's pools). 0 where
// the batch runs its single-cache kernels instead: the CPU, a device that cannot index buffer
// arrays, room for fewer than two caches (one a dispatch is what the single-cache kernels do),
// or KVC_BATCH_DECODE=per_cache in the environment (read per call, so that a test or a
// benchmark can run both; it also gives each layer's eviction its own dispatches).
uint32_t batch_caches_per_dispatch(Backend& backend, uint32_t arrays, uint32_t singles);

// `members` in order, in groups of at most `per_dispatch` (groups of one where it is 0).
std::vector<std::vector<size_t>> dispatch_groups(const std::vector<size_t>& members, uint32_t per_dispatch);

// A dispatch's binding arrays, one after another: per operand, the buffer it gives for each
// entry of `group`, then for the array's elements past the group the first entry's again
// (bound, never read), `per_dispatch` elements in all.
template <typename Entry>
std::vector<vk::BufferSlice> binding_arrays(const std::vector<Entry>& entries, const std::vector<size_t>& group, uint32_t per_dispatch,
                                            std::initializer_list<std::function<vk::BufferSlice(const Entry&)>> operands) {
  std::vector<vk::BufferSlice> slices;
  for (const auto& operand : operands)
    for (uint32_t element = 0; element < per_dispatch; ++element)
      slices.push_back(operand(entries[group[element < group.size() ? element : 0]]));
  return slices;
}

}  // namespace kvc::ops
