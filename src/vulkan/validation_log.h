// Every validation-layer message reported to this process, from every Device (libkvc's own
// instances; an application's instance reports to its own messenger): a count, and the first
// few texts so that a run that must have none (the Vulkan tests, KVC_VALIDATION=1 in CI) can
// fail naming them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvc::vk {

// How many message texts are kept: the first ones name the bug; later ones are mostly its echoes.
constexpr size_t kKeptValidationMessages = 8;

// Counts one message and keeps its text while fewer than kKeptValidationMessages are kept.
// Thread-safe: the layer reports on whichever thread made the call.
void record_validation_message(const char* text);

// Messages recorded since the process started.
uint64_t validation_messages_in_process();

// The first kKeptValidationMessages texts, oldest first.
std::vector<std::string> first_validation_messages();

}  // namespace kvc::vk
