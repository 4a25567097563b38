// One soak run: a policy's cache, one dtype, one feed path, a prompt and then decode tokens,
// checked as they go.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvc/kvc.h"
#include "soak/soak_cases.h"
#include "soak/soak_options.h"

namespace kvc::soak {

struct SoakResult {
  uint64_t decode_tokens = 0;    // decode tokens fed before the end or the first violation
  uint64_t warmup_tokens = 0;    // of which the first ones set the steady state
  uint64_t refills = 0;          // FOURIER: resets and new prompts after a full window
  double seconds = 0;            // wall time of the whole run, prompts and checks included
  uint64_t device_bytes_min = 0, device_bytes_max = 0;  // kvc_cache_stats over the steady state
  uint64_t slots_held_min = 0, slots_held_max = 0;
  uint64_t rss_after_warmup = 0, rss_end = 0, rss_peak = 0;  // resident bytes at the checks
  bool stopped_at_time_limit = false;  // --seconds ended the run after its warm-up
  std::string violation;         // "" when every check passed, else the first failed check
};

// What one run is: a policy's case, a dtype and a feed path.
struct SoakRunSpec {
  const SoakCase* soak_case = nullptr;
  kvc_dtype dtype = KVC_DTYPE_F32;
  FeedPath path = FeedPath::Host;
};

// Runs options.decode_tokens decode tokens through a new cache of the spec's case and checks,
// after every token: the status, every output finite, tokens_seen, and, once warmed up, slots
// held and device bytes within what the last memory period of the warm-up saw; every
// options.check_interval tokens: kvc_cache_read's positions, and the resident set against its
// value after the warm-up plus options.rss_slack_bytes. Stops at the first violation.
SoakResult run_soak(kvc_context* context, const SoakRunSpec& spec, const SoakOptions& options);

// The same runs in lockstep (kvc-soak --lockstep): every run's cache in one context, each decode
// token of all of them recorded into one step, so a real GPU's per-submission latency is paid
// once per token for all policies instead of once per policy. Prompts, refills and the checks
// of each cache stay each run's own; a step that fails fails every run it carried. The
// resident set is the process's: its baseline is taken once the last run's warm-up is over,
// and a leak fails every run still going. A run's seconds run from its own start (after the
// prompts of the runs before it) to its own end. `on_end(index, result)` is called as each run
// ends, so a lockstep killed from outside has reported the runs already over.
std::vector<SoakResult> run_lockstep(kvc_context* context, const std::vector<SoakRunSpec>& specs, const SoakOptions& options,
                                     const std::function<void(size_t, const SoakResult&)>& on_end);

}  // namespace kvc::soak
