#include "soak/soak_run.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "common/dtype.h"
#include "common/finite_check.h"
#include "soak/process_memory.h"
#include "soak/soak_inputs.h"
#include "soak/token_feed.h"

namespace kvc::soak {
namespace {

struct CacheDeleter {
  void operator()(kvc_cache* cache) const { kvc_cache_destroy(cache); }
};
using CachePtr = std::unique_ptr<kvc_cache, CacheDeleter>;

// The run's state and checks; run_soak drives it token by token.
class Soak {
 public:
  Soak(kvc_context* context, const SoakCase& soak_case, kvc_dtype dtype, FeedPath path, const SoakOptions& options)
      : context_(context),
        case_(soak_case),
        desc_(soak_case.desc(dtype)),
        options_(options),
        feed_(context, desc_, path, soak_case.prompt_tokens),
        inputs_(desc_, options.seed) {
    result_.warmup_tokens = std::max<uint64_t>(options.decode_tokens / 10, 2 * uint64_t(soak_case.memory_period));
  }

  SoakResult run() {
    start_ = std::chrono::steady_clock::now();
    drive();
    result_.seconds = elapsed_seconds();
    return result_;
  }

 private:
  void drive() {
    if (options_.decode_tokens <= result_.warmup_tokens) {
      fail("--tokens " + std::to_string(options_.decode_tokens) + " leaves no steady state after the warm-up of " +
           std::to_string(result_.warmup_tokens) + " tokens");
      return;
    }
    kvc_cache* cache = nullptr;
    if (!succeeded(kvc_cache_create(context_, &desc_, &cache), "kvc_cache_create")) return;
    cache_.reset(cache);
    if (!feed_prompt()) return;
    std::vector<std::vector<unsigned char>> planted_leak;
    for (uint64_t token = 0; token < options_.decode_tokens; ++token) {
      if (case_.refills && layer_tokens_ == case_.capacity) {
        if (!succeeded(kvc_cache_reset(cache_.get()), "kvc_cache_reset")) return;
        layer_tokens_ = 0;
        if (!feed_prompt()) return;
        ++result_.refills;
      }
      if (!feed_checked(1, "decode token " + std::to_string(token))) return;
      result_.decode_tokens = token + 1;
      if (options_.planted_leak_bytes) planted_leak.emplace_back(options_.planted_leak_bytes, 1);
      if (!check_memory(token)) return;
      const bool last_of_warmup = token + 1 == result_.warmup_tokens;
      if ((token + 1) % options_.check_interval == 0 || last_of_warmup || token + 1 == options_.decode_tokens) {
        if (!check_positions(token) || !check_resident(token, last_of_warmup)) return;
        if (options_.seconds_limit && token + 1 < options_.decode_tokens && elapsed_seconds() > double(options_.seconds_limit)) {
          // A pass needs a steady-state check, past the one that closes the warm-up.
          if (token + 1 <= result_.warmup_tokens)
            fail("the time limit of " + std::to_string(options_.seconds_limit) + " s came before a check after the warm-up, at decode token " +
                 std::to_string(token));
          result_.stopped_at_time_limit = true;
          return;
        }
      }
    }
  }

  double elapsed_seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

  bool feed_prompt() {
    if (!feed_checked(case_.prompt_tokens, "the prompt")) return false;
    return !case_.ends_prefill || succeeded(kvc_cache_end_prefill(cache_.get()), "kvc_cache_end_prefill");
  }

  // Feeds n_tokens of every layer and checks the outputs and tokens_seen.
  bool feed_checked(uint32_t n_tokens, const std::string& what) {
    if (!succeeded(feed_.feed(cache_.get(), n_tokens, inputs_.next(n_tokens), outputs_), what)) return false;
    layer_tokens_ += n_tokens;
    const size_t count = outputs_[0].size() / dtype_size(static_cast<Dtype>(desc_.dtype));
    for (uint32_t layer = 0; layer < desc_.num_layers; ++layer) {
      const size_t bad = first_non_finite(outputs_[layer].data(), static_cast<Dtype>(desc_.dtype), count);
      if (bad != count) return fail(what + ": layer " + std::to_string(layer) + " output element " + std::to_string(bad) + " is not finite");
    }
    stats_ = kvc_cache_stats{};
    stats_.struct_size = sizeof(stats_);
    if (!succeeded(kvc_cache_stats_get(cache_.get(), &stats_), "kvc_cache_stats_get")) return false;
    if (stats_.tokens_seen != layer_tokens_ * desc_.num_layers)
      return fail(what + ": tokens_seen is " + std::to_string(stats_.tokens_seen) + ", expected " +
                  std::to_string(layer_tokens_ * desc_.num_layers));
    return true;
  }

  // The last memory period of the warm-up sets the band; later tokens must stay in it.
  bool check_memory(uint64_t token) {
    const uint64_t warmup = result_.warmup_tokens;
    if (token + case_.memory_period < warmup) return true;
    const uint64_t bytes = stats_.device_bytes_held, slots = stats_.slots_held;
    if (token < warmup) {
      const bool first = token + case_.memory_period == warmup;
      result_.device_bytes_min = first ? bytes : std::min(result_.device_bytes_min, bytes);
      result_.device_bytes_max = first ? bytes : std::max(result_.device_bytes_max, bytes);
      result_.slots_held_min = first ? slots : std::min(result_.slots_held_min, slots);
      result_.slots_held_max = first ? slots : std::max(result_.slots_held_max, slots);
      return true;
    }
    if (bytes < result_.device_bytes_min || bytes > result_.device_bytes_max)
      return fail("decode token " + std::to_string(token) + ": device_bytes_held is " + std::to_string(bytes) +
                  ", outside the warm-up's " + std::to_string(result_.device_bytes_min) + ".." + std::to_string(result_.device_bytes_max));
    if (slots < result_.slots_held_min || slots > result_.slots_held_max)
      return fail("decode token " + std::to_string(token) + ": slots_held is " + std::to_string(slots) + ", outside the warm-up's " +
                  std::to_string(result_.slots_held_min) + ".." + std::to_string(result_.slots_held_max));
    return true;
  }

  bool check_positions(uint64_t token) {
    for (uint32_t layer = 0; layer < desc_.num_layers; ++layer) {
      uint32_t slots = 0;
      if (!succeeded(kvc_cache_layer_slots(cache_.get(), layer, &slots), "kvc_cache_layer_slots")) return false;
      positions_.resize(size_t(desc_.num_kv_heads) * slots);
      if (!succeeded(kvc_cache_read(cache_.get(), layer, slots, desc_.dtype, nullptr, nullptr, positions_.data()), "kvc_cache_read"))
        return false;
      const std::string wrong = soak::check_positions(case_, positions_, desc_.num_kv_heads, slots, layer_tokens_);
      if (!wrong.empty()) return fail("decode token " + std::to_string(token) + ", layer " + std::to_string(layer) + ": " + wrong);
    }
    return true;
  }

  bool check_resident(uint64_t token, bool last_of_warmup) {
    const uint64_t rss = resident_bytes();
    result_.rss_end = rss;
    result_.rss_peak = std::max(result_.rss_peak, rss);
    if (last_of_warmup) result_.rss_after_warmup = rss;
    if (token < result_.warmup_tokens || rss <= result_.rss_after_warmup + options_.rss_slack_bytes) return true;
    return fail("decode token " + std::to_string(token) + ": resident memory is " + std::to_string(rss) + " bytes, " +
                std::to_string(rss - result_.rss_after_warmup) + " more than after the warm-up (slack " +
                std::to_string(options_.rss_slack_bytes) + ")");
  }

  bool succeeded(kvc_status status, const std::string& what) {
    if (status == KVC_OK) return true;
    return fail(what + ": " + kvc_status_name(status) + " (" + kvc_context_last_error(context_) + ")");
  }

  bool fail(const std::string& violation) {
    result_.violation = violation;
    return false;
  }

  kvc_context* context_;
  const SoakCase& case_;
  const kvc_cache_desc desc_;
  const SoakOptions& options_;
  TokenFeed feed_;
  InputGenerator inputs_;
  CachePtr cache_;
  uint64_t layer_tokens_ = 0;  // tokens each layer took since the cache was created or reset
  kvc_cache_stats stats_{};
  std::vector<std::vector<unsigned char>> outputs_;
  std::vector<int32_t> positions_;
  SoakResult result_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

SoakResult run_soak(kvc_context* context, const SoakCase& soak_case, kvc_dtype dtype, FeedPath path,
                    const SoakOptions& options) {
  return Soak(context, soak_case, dtype, path, options).run();
}

}  // namespace kvc::soak
