// The soak's view of its own process memory: the resident set the kernel reports, which is what
// a host-side leak in libkvc (or a growing allocator arena) would raise.
#pragma once

#include <cstdint>

namespace kvc::soak {

// Resident bytes of this process (/proc/self/statm's second field times the page size), or 0
// where /proc is not mounted.
uint64_t resident_bytes();

}  // namespace kvc::soak
