// Which buffers a shader may write, read from its SPIR-V: the recorder orders a command after
// an earlier one only where one of them writes what the other binds (vulkan/recorder.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvc::vk {

// For bindings 0 .. num_bindings - 1 of descriptor set 0: false where the module declares the
// buffer readonly (NonWritable on its variable, or on every member of its block), true
// everywhere else, a binding the module does not use included. What the scan cannot follow
// counts as written (the embedded modules are glslang's, so only a defect would give it): every
// binding of a module whose words do not parse or that decorates through groups, a binding
// whose type chain does not end.
std::vector<bool> written_bindings(const uint32_t* words, size_t word_count, uint32_t num_bindings);

}  // namespace kvc::vk
