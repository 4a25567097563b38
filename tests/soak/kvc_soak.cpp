// kvc-soak (issue 16): a long decode through every policy that bounds memory, on the CPU
// backend or a Vulkan device, checking that device bytes and host memory stay flat after a
// warm-up, every output is finite, positions are what kvc.h documents and tokens_seen counts.
// One line per policy, dtype and path; exits 1 on any violation, a validation-layer message
// (KVC_VALIDATION=1) included. docs/reliability.md, "Soak".
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kvc/kvc.h"
#include "soak/soak_cases.h"
#include "soak/soak_options.h"
#include "soak/soak_run.h"
#include "vulkan/profile.h"
#include "vulkan/validation_log.h"

namespace {

using kvc::soak::SoakCase;
using kvc::soak::SoakOptions;

struct ContextDeleter {
  void operator()(kvc_context* context) const { kvc_context_destroy(context); }
};

double mib(uint64_t bytes) { return double(bytes) / (1 << 20); }

// Validation-layer messages the context has seen (0 on the CPU backend or without validation).
uint32_t validation_messages(kvc_context* context) {
  kvc_context_info info{};
  info.struct_size = sizeof(info);
  kvc_context_info_get(context, &info);
  return info.validation_messages;
}

// The cases --policies names, in the order given; an unknown name is an error.
bool select_cases(const SoakOptions& options, std::vector<SoakCase>& selected) {
  const std::vector<SoakCase> all = kvc::soak::soak_cases();
  if (options.policies.empty()) {
    selected = all;
    return true;
  }
  for (const std::string& name : options.policies) {
    const auto named = std::find_if(all.begin(), all.end(), [&](const SoakCase& c) { return c.name == name; });
    if (named == all.end()) {
      std::fprintf(stderr, "kvc-soak: unknown policy '%s' (the bounded ones: STREAMING,H2O,TOVA,TREEKV,FREQKV,FAEDKV,FOURIER)\n",
                   name.c_str());
      return false;
    }
    selected.push_back(*named);
  }
  return true;
}

void print_result(const SoakCase& c, kvc_dtype dtype, kvc::soak::FeedPath path, const kvc::soak::SoakResult& r) {
  std::printf("%-9s %s %-6s %8llu tokens %8.1f s %9.0f tok/s  device bytes %llu..%llu  slots %llu..%llu  refills %llu  "
              "RSS %.1f -> %.1f MiB (peak %.1f)  %s%s\n",
              c.name.c_str(), dtype == KVC_DTYPE_F32 ? "f32" : "f16", kvc::soak::feed_path_name(path),
              static_cast<unsigned long long>(r.decode_tokens), r.seconds, r.seconds > 0 ? r.decode_tokens / r.seconds : 0.0,
              static_cast<unsigned long long>(r.device_bytes_min), static_cast<unsigned long long>(r.device_bytes_max),
              static_cast<unsigned long long>(r.slots_held_min), static_cast<unsigned long long>(r.slots_held_max),
              static_cast<unsigned long long>(r.refills), mib(r.rss_after_warmup), mib(r.rss_end), mib(r.rss_peak),
              r.violation.empty() ? (r.stopped_at_time_limit ? "ok (stopped at --seconds)" : "ok") : "FAILED: ", r.violation.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  SoakOptions options;
  std::vector<SoakCase> cases;
  if (!kvc::soak::parse_options(argc, argv, options) || !select_cases(options, cases)) return 2;

  kvc_context_desc context_desc = kvc_context_desc_default();
  context_desc.backend = options.backend;
  kvc_context* raw_context = nullptr;
  if (kvc_context_create(&context_desc, &raw_context) != KVC_OK) {
    std::fprintf(stderr, "kvc-soak: no context: %s\n", kvc_last_create_error());
    return 2;
  }
  const std::unique_ptr<kvc_context, ContextDeleter> context(raw_context);
  kvc_context_info info{};
  info.struct_size = sizeof(info);
  kvc_context_info_get(context.get(), &info);
  std::printf("kvc-soak on %s: %llu decode tokens per run%s, seed %llu, warm-up max(10%%, two memory periods)\n", info.device_name,
              static_cast<unsigned long long>(options.decode_tokens), options.lockstep ? ", the runs in lockstep (one step per token)" : "",
              static_cast<unsigned long long>(options.seed));
  std::fflush(stdout);  // a run killed from outside still names its device

  std::vector<kvc::soak::SoakRunSpec> specs;
  for (const SoakCase& c : cases)
    for (kvc_dtype dtype : options.dtypes)
      for (kvc::soak::FeedPath path : options.paths) specs.push_back({&c, dtype, path});

  // Validation-layer messages fail the runs that were going on when they arrived.
  const auto fail_on_messages = [&](uint32_t messages_before, kvc::soak::SoakResult& result) {
    const uint32_t messages = validation_messages(context.get()) - messages_before;
    if (messages != 0 && result.violation.empty())
      result.violation = std::to_string(messages) + " validation-layer messages; the process's first: " +
                         kvc::vk::first_validation_messages().front();
  };
  int violations = 0;
  const auto report = [&](const kvc::soak::SoakRunSpec& spec, const kvc::soak::SoakResult& result) {
    print_result(*spec.soak_case, spec.dtype, spec.path, result);
    violations += !result.violation.empty();
  };
  if (options.lockstep) {
    // Each run is reported as it ends; validation messages count against the runs still going.
    const uint32_t messages_before = validation_messages(context.get());
    kvc::soak::run_lockstep(context.get(), specs, options, [&](size_t index, kvc::soak::SoakResult result) {
      fail_on_messages(messages_before, result);
      report(specs[index], result);
    });
  } else {
    for (const kvc::soak::SoakRunSpec& spec : specs) {
      const uint32_t messages_before = validation_messages(context.get());
      kvc::soak::SoakResult result = kvc::soak::run_soak(context.get(), spec, options);
      fail_on_messages(messages_before, result);
      report(spec, result);
    }
  }
  // KVC_PROFILE=1: where the device's time per token went (vulkan/profile.h).
  std::fputs(kvc::vk::profile_take("kvc-soak, GPU time per command").c_str(), stdout);
  if (violations) std::printf("kvc-soak: %d run(s) FAILED\n", violations);
  return violations ? 1 : 0;
}
