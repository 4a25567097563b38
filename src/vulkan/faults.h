// Fault injection, for tests only (CMake option KVC_FAULT_INJECTION, off by default and in
// every release or installed build): each Vulkan call of the kinds below that libkvc makes
// asks injected() first, which counts it and, when a test armed that kind and count, answers
// the error the call really returns instead of letting it run. Without the option injected()
// is a constant VK_SUCCESS and the checks vanish. VkFFT's own Vulkan calls are not counted:
// a plan's creation (FftPlan) counts as one CreatePipeline, and an injected failure there
// fails it as initializeVkFFT does when one of its pipelines cannot be created.
#pragma once

#include <cstdint>

#include "vulkan/vk.h"

namespace kvc::vk::faults {

enum class Op : uint32_t {
  AllocateMemory,         // vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY
  MapMemory,              // vkMapMemory: VK_ERROR_MEMORY_MAP_FAILED
  AllocateDescriptorSet,  // vkAllocateDescriptorSets: VK_ERROR_OUT_OF_POOL_MEMORY (recovered), _OUT_OF_DEVICE_MEMORY
  CreatePipeline,         // vkCreateComputePipelines, a VkFFT plan: VK_ERROR_OUT_OF_DEVICE_MEMORY
  QueueSubmit,            // vkQueueSubmit: VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_DEVICE_LOST
  WaitForFences,          // vkWaitForFences: VK_ERROR_DEVICE_LOST
  Count
};

const char* op_name(Op op);

#ifdef KVC_FAULT_INJECTION
// Counts one call of `op`; VK_SUCCESS, or the armed error when this is the armed call.
VkResult injected(Op op);

// The test's side. The counts and the armed fault are process-wide and unguarded: a test that
// injects runs its contexts on one thread.
// Zeroes every count and disarms.
void reset();
// Calls of `op` counted since the last reset().
uint64_t count(Op op);
// Makes the call of `op` that brings its count to `nth` (1-based, counted since reset()) fail
// with `error`, once.
void arm(Op op, uint64_t nth, VkResult error);
// Whether the armed fault has fired since it was armed.
bool fired();
#else
constexpr VkResult injected(Op) { return VK_SUCCESS; }
#endif

}  // namespace kvc::vk::faults
