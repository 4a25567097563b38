// libFuzzer entry point: every input runs a sequence of C API calls (call_sequence.h) on a
// fresh context of the backend KVC_FUZZ_BACKEND names: cpu (the default), vulkan or auto. With
// KVC_VALIDATION=1 (scripts/fuzz.sh's Vulkan run) a validation-layer message is a finding.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdlib>
#include <cstring>

#include "call_sequence.h"
#include "check.h"
#include "vulkan/validation_log.h"

namespace {

kvc_backend fuzzed_backend() {
  const char* name = std::getenv("KVC_FUZZ_BACKEND");
  if (!name || std::strcmp(name, "cpu") == 0) return KVC_BACKEND_CPU;
  if (std::strcmp(name, "vulkan") == 0) return KVC_BACKEND_VULKAN;
  if (std::strcmp(name, "auto") == 0) return KVC_BACKEND_AUTO;
  kvc::fuzz::report_finding("KVC_FUZZ_BACKEND", "is none of cpu, vulkan, auto");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  static const kvc_backend backend = fuzzed_backend();
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = backend;
  kvc_context* context = nullptr;
  if (kvc_context_create(&desc, &context) != KVC_OK) kvc::fuzz::report_finding("kvc_context_create", kvc_last_create_error());
  {
    FuzzedDataProvider data(bytes, size);
    kvc::fuzz::CallSequence calls(context);
    calls.run(data);
  }
  kvc_context_destroy(context);
  // After the destruction, which reports objects left alive.
  if (kvc::vk::validation_messages_in_process() != 0)
    kvc::fuzz::report_finding("the validation layer reported:", kvc::vk::first_validation_messages().front().c_str());
  return 0;
}
