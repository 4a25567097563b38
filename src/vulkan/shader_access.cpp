#include "vulkan/shader_access.h"

#include <map>
#include <set>

namespace kvc::vk {
namespace {

// SPIR-V's numbers for what the scan reads (the SPIR-V 1.6 specification, sec. 3).
constexpr uint32_t kMagic = 0x07230203u;
enum Op : uint32_t {
  kOpTypeArray = 28,
  kOpTypeRuntimeArray = 29,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpVariable = 59,
  kOpDecorate = 71,
  kOpMemberDecorate = 72,
  kOpDecorationGroup = 73,  // groups (73-75) are not followed: a module with one counts as malformed
  kOpGroupMemberDecorate = 75,
};
enum Decoration : uint32_t { kNonWritable = 24, kBinding = 33, kDescriptorSet = 34 };
constexpr size_t kHeaderWords = 5;

struct Module {
  std::map<uint32_t, uint32_t> binding, descriptor_set;  // by variable id
  std::set<uint32_t> non_writable;                       // variable ids
  std::map<uint32_t, std::set<uint32_t>> non_writable_members;  // by struct type id
  std::map<uint32_t, uint32_t> struct_members;           // member count by struct type id
  std::map<uint32_t, uint32_t> element_type;             // pointers' and arrays' element type
  std::map<uint32_t, uint32_t> variable_type;            // pointer type by variable id
};

bool scan(const uint32_t* words, size_t word_count, Module& module) {
  if (word_count < kHeaderWords || words[0] != kMagic) return false;
  for (size_t at = kHeaderWords; at < word_count;) {
    const uint32_t length = words[at] >> 16, op = words[at] & 0xffffu;
    if (length == 0 || at + length > word_count) return false;
    if (op >= kOpDecorationGroup && op <= kOpGroupMemberDecorate) return false;
    const uint32_t* operand = words + at + 1;
    if (op == kOpDecorate && length >= 3) {
      if (operand[1] == kNonWritable) module.non_writable.insert(operand[0]);
      if (operand[1] == kBinding && length >= 4) module.binding[operand[0]] = operand[2];
      if (operand[1] == kDescriptorSet && length >= 4) module.descriptor_set[operand[0]] = operand[2];
    } else if (op == kOpMemberDecorate && length >= 4 && operand[2] == kNonWritable) {
      module.non_writable_members[operand[0]].insert(operand[1]);
    } else if (op == kOpTypeStruct && length >= 2) {
      module.struct_members[operand[0]] = length - 2;
    } else if ((op == kOpTypeArray || op == kOpTypeRuntimeArray) && length >= 3) {
      module.element_type[operand[0]] = operand[1];
    } else if (op == kOpTypePointer && length >= 4) {
      module.element_type[operand[0]] = operand[2];
    } else if (op == kOpVariable && length >= 4) {
      module.variable_type[operand[1]] = operand[0];
    }
    at += length;
  }
  return true;
}

// Whether `variable` is a readonly buffer: NonWritable itself, or a block (behind its pointer
// and any binding array) whose every member is.
bool read_only(const Module& module, uint32_t variable) {
  if (module.non_writable.count(variable)) return true;
  const auto pointer = module.variable_type.find(variable);
  if (pointer == module.variable_type.end()) return false;
  // Behind the pointer and the arrays; a chain longer than a module's types (a cycle: malformed)
  // leaves the binding written.
  uint32_t type = pointer->second;
  size_t steps = 0;
  for (auto element = module.element_type.find(type); element != module.element_type.end();
       element = module.element_type.find(type)) {
    if (++steps > module.element_type.size()) return false;
    type = element->second;
  }
  const auto members = module.struct_members.find(type);
  const auto marked = module.non_writable_members.find(type);
  return members != module.struct_members.end() && marked != module.non_writable_members.end() &&
         marked->second.size() == members->second;
}

}  // namespace

std::vector<bool> written_bindings(const uint32_t* words, size_t word_count, uint32_t num_bindings) {
  Module module;
  if (!scan(words, word_count, module)) return std::vector<bool>(num_bindings, true);
  // Two blocks may alias one binding (an f16 and an f32 view): it is read-only only if each is.
  std::vector<int> readers(num_bindings, 0), writers(num_bindings, 0);
  for (const auto& [variable, binding] : module.binding) {
    const auto set = module.descriptor_set.find(variable);
    if (binding >= num_bindings || (set != module.descriptor_set.end() && set->second != 0)) continue;
    ++(read_only(module, variable) ? readers : writers)[binding];
  }
  std::vector<bool> written(num_bindings);
  for (uint32_t binding = 0; binding < num_bindings; ++binding)
    written[binding] = writers[binding] > 0 || readers[binding] == 0;
  return written;
}

}  // namespace kvc::vk
