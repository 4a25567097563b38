// KVC_PROFILE=1: GPU time per kernel, for finding what limits a step. Every recorder then
// writes a timestamp before each command of its own submissions and, when the submission
// completes, adds each command's time to a process-wide table under the command's name (the
// shader; "fft" for VkFFT's commands, "copy" and "fill" for transfers). The extra timestamps
// and barriers cost a little: time rows without it, then profile them. Pipelines also print the
// driver's statistics of each kernel where it offers them (vulkan/pipeline_statistics.h).
#pragma once

#include <string>

namespace kvc::vk {

// True when the environment variable KVC_PROFILE is set to anything but "0" (read once).
bool profiling_enabled();
void profile_add(const std::string& command, double ns);
// The table since the last call, one line per command (calls, total ms, mean us), the most
// time first, headed by `title`; empty when nothing was recorded. Clears the table.
std::string profile_take(const std::string& title);

}  // namespace kvc::vk
