// kvc-soak's command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvc/kvc.h"

namespace kvc::soak {

// How a decode token reaches the cache: host arrays (kvc_cache_append / kvc_attend, each its own
// submission) or the engine path (device buffers, every layer of a token in one step).
enum class FeedPath { Host, Engine };
const char* feed_path_name(FeedPath path);

struct SoakOptions {
  uint64_t decode_tokens = 1000000;  // per policy, dtype and path
  kvc_backend backend = KVC_BACKEND_CPU;
  std::vector<std::string> policies;  // names as policy_names() lists them
  std::vector<kvc_dtype> dtypes = {KVC_DTYPE_F32, KVC_DTYPE_F16};
  std::vector<FeedPath> paths = {FeedPath::Host, FeedPath::Engine};
  uint64_t seed = 1;
  // Resident memory may rise this much over its value at the end of the warm-up (allocator
  // arenas settle, libkvc's read-back vectors come and go) before the soak calls it a leak.
  uint64_t rss_slack_bytes = 4u << 20;
  // Tokens between the checks that cost a read-back: kvc_cache_read's positions and the RSS.
  uint64_t check_interval = 1000;
  // Wall-clock bound of one run (0: none), so that a run on borrowed time still reports what
  // it did instead of being killed with nothing printed.
  uint64_t seconds_limit = 0;
  // Every run's cache in one context, each decode token of all of them in one step
  // (run_lockstep): a GPU's submission latency is paid once per token for all the runs.
  bool lockstep = false;
  // Self-test of the detector: the soak itself keeps this many host bytes per decode token,
  // which must make it fail.
  uint64_t planted_leak_bytes = 0;
};

// Parses argv; on a bad or --help argument prints the usage to stderr and returns false.
bool parse_options(int argc, char** argv, SoakOptions& options);

}  // namespace kvc::soak
