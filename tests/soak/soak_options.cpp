#include "soak/soak_options.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace kvc::soak {
namespace {

constexpr const char* kUsage =
    "usage: kvc-soak [--tokens N] [--backend cpu|vulkan|auto] [--policies A,B,...] [--dtypes f32,f16]\n"
    "                [--paths host,engine] [--seed N] [--rss-slack-mib N] [--check-interval N]\n"
    "                [--seconds N] [--lockstep] [--plant-leak BYTES]\n"
    "  --tokens N          decode tokens per policy, dtype and path (default 1000000)\n"
    "  --backend           cpu (default), vulkan or auto\n"
    "  --policies          STREAMING,H2O,TOVA,TREEKV,FREQKV,FAEDKV,FOURIER (default: all)\n"
    "  --dtypes            f32,f16 (default: both)\n"
    "  --paths             host (kvc_cache_append/kvc_attend), engine (device buffers, one step\n"
    "                      per token) (default: both)\n"
    "  --seed N            seed of the random K, V and Q (default 1)\n"
    "  --rss-slack-mib N   resident memory growth allowed after the warm-up (default 4)\n"
    "  --check-interval N  tokens between position and resident-memory checks (default 1000)\n"
    "  --seconds N         a run past N seconds stops at its next check: a pass with fewer tokens\n"
    "                      when its warm-up is over, else a failure (default: no limit)\n"
    "  --lockstep          the runs side by side, each decode token of all of them in one step\n"
    "                      (a GPU's submission latency paid once per token for all)\n"
    "  --plant-leak BYTES  self-test: keep BYTES of host memory per token; the soak must fail\n";

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream stream(list);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

bool parse_count(const char* text, uint64_t& value) {
  char* end = nullptr;
  value = std::strtoull(text, &end, 10);
  return end != text && *end == '\0';
}

bool parse_backend(const std::string& name, kvc_backend& backend) {
  if (name == "cpu") backend = KVC_BACKEND_CPU;
  else if (name == "vulkan") backend = KVC_BACKEND_VULKAN;
  else if (name == "auto") backend = KVC_BACKEND_AUTO;
  else return false;
  return true;
}

bool parse_dtypes(const std::string& list, std::vector<kvc_dtype>& dtypes) {
  dtypes.clear();
  for (const std::string& name : split(list)) {
    if (name == "f32") dtypes.push_back(KVC_DTYPE_F32);
    else if (name == "f16") dtypes.push_back(KVC_DTYPE_F16);
    else return false;
  }
  return !dtypes.empty();
}

bool parse_paths(const std::string& list, std::vector<FeedPath>& paths) {
  paths.clear();
  for (const std::string& name : split(list)) {
    if (name == "host") paths.push_back(FeedPath::Host);
    else if (name == "engine") paths.push_back(FeedPath::Engine);
    else return false;
  }
  return !paths.empty();
}

bool parse_one(const std::string& flag, const char* value, SoakOptions& options) {
  uint64_t count = 0;
  if (flag == "--tokens") return parse_count(value, options.decode_tokens) && options.decode_tokens > 0;
  if (flag == "--backend") return parse_backend(value, options.backend);
  if (flag == "--policies") return !(options.policies = split(value)).empty();
  if (flag == "--dtypes") return parse_dtypes(value, options.dtypes);
  if (flag == "--paths") return parse_paths(value, options.paths);
  if (flag == "--seed") return parse_count(value, options.seed);
  if (flag == "--rss-slack-mib") {
    if (!parse_count(value, count)) return false;
    options.rss_slack_bytes = count << 20;
    return true;
  }
  if (flag == "--check-interval") return parse_count(value, options.check_interval) && options.check_interval > 0;
  if (flag == "--seconds") return parse_count(value, options.seconds_limit) && options.seconds_limit > 0;
  if (flag == "--plant-leak") return parse_count(value, options.planted_leak_bytes);
  return false;
}

}  // namespace

const char* feed_path_name(FeedPath path) { return path == FeedPath::Host ? "host" : "engine"; }

bool parse_options(int argc, char** argv, SoakOptions& options) {
  for (int i = 1; i < argc;) {
    if (std::string(argv[i]) == "--lockstep") {  // the one flag without a value
      options.lockstep = true;
      i += 1;
    } else if (i + 1 < argc && parse_one(argv[i], argv[i + 1], options)) {
      i += 2;
    } else {
      std::fprintf(stderr, "kvc-soak: bad argument '%s'\n%s", argv[i], kUsage);
      return false;
    }
  }
  return true;
}

}  // namespace kvc::soak
