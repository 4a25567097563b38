#include "vulkan/faults.h"

#include <array>

namespace kvc::vk::faults {

const char* op_name(Op op) {
  switch (op) {
    case Op::AllocateMemory: return "vkAllocateMemory";
    case Op::MapMemory: return "vkMapMemory";
    case Op::AllocateDescriptorSet: return "vkAllocateDescriptorSets";
    case Op::CreatePipeline: return "vkCreateComputePipelines";
    case Op::QueueSubmit: return "vkQueueSubmit";
    case Op::WaitForFences: return "vkWaitForFences";
    case Op::Count: break;
  }
  return "?";
}

#ifdef KVC_FAULT_INJECTION
namespace {

struct State {
  std::array<uint64_t, size_t(Op::Count)> counts{};
  Op armed_op = Op::Count;  // Count: nothing armed
  uint64_t armed_nth = 0;
  VkResult armed_error = VK_SUCCESS;
  bool fired = false;
};

State& state() {
  static State instance;
  return instance;
}

}  // namespace

VkResult injected(Op op) {
  State& s = state();
  const uint64_t nth = ++s.counts[size_t(op)];
  if (op != s.armed_op || nth != s.armed_nth) return VK_SUCCESS;
  s.armed_op = Op::Count;
  s.fired = true;
  return s.armed_error;
}

void reset() { state() = State(); }

uint64_t count(Op op) { return state().counts[size_t(op)]; }

void arm(Op op, uint64_t nth, VkResult error) {
  State& s = state();
  s.armed_op = op;
  s.armed_nth = nth;
  s.armed_error = error;
  s.fired = false;
}

bool fired() { return state().fired; }
#endif

}  // namespace kvc::vk::faults
