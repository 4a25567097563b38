// What the fuzzer asserts about every call: a finding aborts with the call and the reason,
// which libFuzzer reports as a crash and saves the input for.
#pragma once

#include "kvc/kvc.h"

namespace kvc::fuzz {

// Aborts, naming the call and the broken invariant.
[[noreturn]] void report_finding(const char* call, const char* invariant);

// A status every entry point may return: one of kvc_status's values other than KVC_TIMEOUT
// (which only kvc_step_wait gives).
inline bool is_call_status(kvc_status status) {
  return status >= KVC_OK && status <= KVC_ERROR_INTERNAL;
}

}  // namespace kvc::fuzz
