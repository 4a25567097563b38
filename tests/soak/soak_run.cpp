#include "soak/soak_run.h"

#include <algorithm>
#include <chrono>
#include <functional>
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

// One run's state and checks, fed a token at a time: alone (run_soak) or beside other runs in
// one step per token (run_lockstep).
class Soak {
 public:
  Soak(kvc_context* context, const SoakRunSpec& spec, const SoakOptions& options)
      : context_(context),
        case_(*spec.soak_case),
        desc_(spec.soak_case->desc(spec.dtype)),
        options_(options),
        feed_(context, desc_, spec.path, spec.soak_case->prompt_tokens),
        inputs_(desc_, options.seed) {
    result_.warmup_tokens = std::max<uint64_t>(options.decode_tokens / 10, 2 * uint64_t(case_.memory_period));
    resident_warmup_tokens_ = result_.warmup_tokens;
  }

  // Creates the cache and feeds the prompt; the run is active after it unless that failed.
  void start() {
    start_ = std::chrono::steady_clock::now();
    set_active(begin());
  }

  // Whether the run takes another decode token: none failed, some are left, no time limit hit.
  bool active() const { return active_; }

  uint64_t warmup_tokens() const { return result_.warmup_tokens; }
  // Lockstep: the resident set is the process's, so its baseline waits for the last warm-up of
  // all the runs (`tokens`) instead of this run's own.
  void take_resident_baseline_at(uint64_t tokens) { resident_warmup_tokens_ = tokens; }

  // Before a token: a full FOURIER cache is reset and takes its prompt again.
  void prepare_token() {
    if (!case_.refills || layer_tokens_ != case_.capacity) return;
    layer_tokens_ = 0;
    set_active(succeeded(kvc_cache_reset(cache_.get()), "kvc_cache_reset") && feed_prompt());
    result_.refills += active_;
  }

  // Records the token's calls into the caller's open step (the host path's calls run in it too).
  kvc_status record_token() { return feed_.record(cache_.get(), 1, inputs_.next(1), outputs_); }

  // Feeds the token on its own: a step of its own on the engine path, a submission per call on
  // the host path.
  kvc_status feed_token() { return feed_.feed(cache_.get(), 1, inputs_.next(1), outputs_); }

  // After the token ran with `status`: its checks; the run ends at a violation, at its last
  // token or at a check past the time limit.
  void finish_token(kvc_status status) {
    const uint64_t token = result_.decode_tokens;
    set_active(check_fed(status, 1, "decode token " + std::to_string(token)) && after_token(token));
  }

  const SoakResult& result() const { return result_; }

 private:
  // A run's seconds end where it stops, whatever other runs in its lockstep still do.
  void set_active(bool active) {
    active_ = active;
    if (!active_) result_.seconds = elapsed_seconds();
  }

  bool begin() {
    if (options_.decode_tokens <= result_.warmup_tokens)
      return fail("--tokens " + std::to_string(options_.decode_tokens) + " leaves no steady state after the warm-up of " +
                  std::to_string(result_.warmup_tokens) + " tokens");
    kvc_cache* cache = nullptr;
    if (!succeeded(kvc_cache_create(context_, &desc_, &cache), "kvc_cache_create")) return false;
    cache_.reset(cache);
    return feed_prompt();
  }

  // The checks after decode token `token` was fed and its outputs checked; false ends the run.
  bool after_token(uint64_t token) {
    result_.decode_tokens = token + 1;
    if (options_.planted_leak_bytes) planted_leak_.emplace_back(options_.planted_leak_bytes, 1);
    if (!check_memory(token)) return false;
    const bool last_of_warmup = token + 1 == result_.warmup_tokens, resident_baseline = token + 1 == resident_warmup_tokens_;
    if ((token + 1) % options_.check_interval != 0 && !last_of_warmup && !resident_baseline && token + 1 != options_.decode_tokens)
      return true;
    if (!check_positions(token) || !check_resident(token, resident_baseline)) return false;
    if (token + 1 == options_.decode_tokens) return false;
    if (!options_.seconds_limit || elapsed_seconds() <= double(options_.seconds_limit)) return true;
    // A pass needs a steady-state check, past the one that closes the warm-up.
    if (token + 1 <= result_.warmup_tokens)
      return fail("the time limit of " + std::to_string(options_.seconds_limit) + " s came before a check after the warm-up, at decode token " +
                  std::to_string(token));
    result_.stopped_at_time_limit = true;
    return false;
  }

  double elapsed_seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

  bool feed_prompt() {
    const uint32_t n_tokens = case_.prompt_tokens;
    if (!check_fed(feed_.feed(cache_.get(), n_tokens, inputs_.next(n_tokens), outputs_), n_tokens, "the prompt")) return false;
    return !case_.ends_prefill || succeeded(kvc_cache_end_prefill(cache_.get()), "kvc_cache_end_prefill");
  }

  // After n_tokens of every layer were fed with `status`: the status (with the message its
  // failing call left, where the feed noted one), the outputs and tokens_seen.
  bool check_fed(kvc_status status, uint32_t n_tokens, const std::string& what) {
    if (status != KVC_OK && !feed_.failure().empty())
      return fail(what + ": " + kvc_status_name(status) + " (" + feed_.failure() + ")");
    if (!succeeded(status, what)) return false;
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

  bool check_resident(uint64_t token, bool baseline) {
    const uint64_t rss = resident_bytes();
    result_.rss_end = rss;
    result_.rss_peak = std::max(result_.rss_peak, rss);
    if (baseline) result_.rss_after_warmup = rss;
    if (token < resident_warmup_tokens_ || rss <= result_.rss_after_warmup + options_.rss_slack_bytes) return true;
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
  std::vector<std::vector<unsigned char>> planted_leak_;
  SoakResult result_;
  uint64_t resident_warmup_tokens_ = 0;  // the resident set's baseline is taken after this many tokens
  bool active_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

SoakResult run_soak(kvc_context* context, const SoakRunSpec& spec, const SoakOptions& options) {
  Soak soak(context, spec, options);
  for (soak.start(); soak.active();) {
    soak.prepare_token();
    if (soak.active()) soak.finish_token(soak.feed_token());
  }
  return soak.result();
}

std::vector<SoakResult> run_lockstep(kvc_context* context, const std::vector<SoakRunSpec>& specs, const SoakOptions& options,
                                     const std::function<void(size_t, const SoakResult&)>& on_end) {
  std::vector<std::unique_ptr<Soak>> soaks;
  uint64_t last_warmup = 0;
  for (const SoakRunSpec& spec : specs) {
    soaks.push_back(std::make_unique<Soak>(context, spec, options));
    last_warmup = std::max(last_warmup, soaks.back()->warmup_tokens());
  }
  std::vector<bool> reported(soaks.size(), false);
  const auto report_ended = [&] {
    for (size_t i = 0; i < soaks.size(); ++i)
      if (!soaks[i]->active() && !reported[i]) {
        reported[i] = true;
        on_end(i, soaks[i]->result());
      }
  };
  for (const std::unique_ptr<Soak>& soak : soaks) {
    soak->take_resident_baseline_at(last_warmup);
    soak->start();
  }
  std::vector<Soak*> stepping;
  std::vector<kvc_status> recorded;
  for (;;) {
    stepping.clear();
    for (const std::unique_ptr<Soak>& soak : soaks) {
      if (soak->active()) soak->prepare_token();
      if (soak->active()) stepping.push_back(soak.get());
    }
    report_ended();
    if (stepping.empty()) break;
    recorded.assign(stepping.size(), KVC_OK);
    kvc_status step = kvc_step_begin(context);
    if (step == KVC_OK) {
      for (size_t i = 0; i < stepping.size(); ++i) recorded[i] = stepping[i]->record_token();
      step = kvc_step_end(context);
      const kvc_status waited = kvc_step_wait(context, UINT64_MAX);
      if (step == KVC_OK) step = waited;
    }
    // A run's own refused call is its violation; a broken step is every run's.
    for (size_t i = 0; i < stepping.size(); ++i) stepping[i]->finish_token(recorded[i] != KVC_OK ? recorded[i] : step);
  }
  std::vector<SoakResult> results;
  for (const std::unique_ptr<Soak>& soak : soaks) results.push_back(soak->result());
  return results;
}

}  // namespace kvc::soak
