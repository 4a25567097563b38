// The engine path (kvc_buffer, kvc_cache_append_device / kvc_attend_device, steps) beside the
// host path, for the engine-path tests on the CPU and on Vulkan: per policy, parameters and a
// short token stream under which the policy acts (a prompt longer than its budget, evictions
// during the prompt and after it, FreqKV (with and without recent tokens), FAEDKV and
// FourierAttention compressions), and caches fed that stream through each path; plus the
// buffer and step checks both backends run.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "kvc/kvc.h"
#include "policies/pyramid_budgets.h"
#include "support/api_helpers.h"
#include "support/test_support.h"

namespace kvc::test {

struct BufferDeleter {
  void operator()(kvc_buffer* buffer) const { kvc_buffer_destroy(buffer); }
};
using BufferPtr = std::unique_ptr<kvc_buffer, BufferDeleter>;

// "KVC_ERROR_...: <the context's last error>", for messages (doctest prints a const char* as a
// pointer, hence std::string here and below).
inline std::string outcome(const kvc_context* context, kvc_status status) {
  return std::string(kvc_status_name(status)) + ": " + kvc_context_last_error(context);
}

// Requires `status` to be KVC_OK, reporting the call and the context's last error otherwise.
inline void require_ok(kvc_context* context, kvc_status status, const char* call) {
  INFO(std::string(call), ": ", outcome(context, status));
  REQUIRE(status == KVC_OK);
}

inline BufferPtr make_buffer(kvc_context* context, uint64_t bytes) {
  kvc_buffer* buffer = nullptr;
  require_ok(context, kvc_buffer_create(context, bytes, &buffer), "kvc_buffer_create");
  return BufferPtr(buffer);
}

inline kvc_context_info context_info(kvc_context* context) {
  kvc_context_info info{sizeof(kvc_context_info)};
  require_ok(context, kvc_context_info_get(context, &info), "kvc_context_info_get");
  return info;
}

inline kvc_cache_stats cache_stats(const kvc_cache* cache) {
  kvc_cache_stats stats{sizeof(kvc_cache_stats)};
  REQUIRE(kvc_cache_stats_get(cache, &stats) == KVC_OK);
  return stats;
}

inline uint32_t layer_slots(const kvc_cache* cache, uint32_t layer) {
  uint32_t slots = 0;
  REQUIRE(kvc_cache_layer_slots(cache, layer, &slots) == KVC_OK);
  return slots;
}

// Waits for the last ended step, polling in 1 ms slices: KVC_TIMEOUT means "ask again".
inline void wait_step(kvc_context* context) {
  kvc_status status;
  while ((status = kvc_step_wait(context, 1000000)) == KVC_TIMEOUT) {
  }
  require_ok(context, status, "kvc_step_wait");
}

// ---------------------------------------------------------------- policies and their streams

inline bool is_window_policy(kvc_policy policy) {
  return policy == KVC_POLICY_SNAPKV || policy == KVC_POLICY_PYRAMIDKV || policy == KVC_POLICY_HITKV || policy == KVC_POLICY_PHITKV;
}

// Policies whose kept slots follow the attention scores of a prompt's queries: on cooperative
// matrices those carry the queries' f16 rounding, and a near tie may fall otherwise than on the
// CPU (test_engine_path_vulkan).
inline bool keeps_by_prompt_scores(kvc_policy policy) {
  return is_window_policy(policy) || policy == KVC_POLICY_H2O || policy == KVC_POLICY_TOVA || policy == KVC_POLICY_TREEKV;
}

// Policies that act when the application ends the prompt (kvc_cache_end_prefill).
inline bool acts_at_prompt_end(kvc_policy policy) {
  return is_window_policy(policy) || policy == KVC_POLICY_FAEDKV || policy == KVC_POLICY_FOURIER;
}

// Policies whose held K/V are computed (a transform), so two backends hold them within rounding.
inline bool transforms_cache(kvc_policy policy) {
  return policy == KVC_POLICY_FREQKV || policy == KVC_POLICY_FAEDKV || policy == KVC_POLICY_FOURIER;
}

// Policies that give no per-slot scores once the prompt ended (their middle is a transform).
inline bool scoreless_after_prompt(kvc_policy policy) { return policy == KVC_POLICY_FAEDKV || policy == KVC_POLICY_FOURIER; }

// Per-layer sizes that grow with depth (P-HitKV's budgets, an H2O cache's sizes): the second
// layer attends over more slots than the first, so intermediates sized by the first layer
// (attention scratch, the eviction scores) grow inside one step.
inline constexpr uint32_t kGrowingLayerBudgets[2] = {14, 30};
inline constexpr uint32_t kGrowingCacheSizes[2] = {16, 28};

// A policy, its parameters and its stream: prompt chunks of uneven sizes, then decode tokens.
// desc() points into this object: keep it alive while caches are created from it.
struct PolicyCase {
  std::string name;
  kvc_policy policy;
  uint32_t capacity;
  std::vector<uint32_t> prompt_chunks;
  uint32_t decode_tokens;
  kvc_eviction_params eviction = kvc_eviction_params_default();
  kvc_window_policy_params window = kvc_window_policy_params_default();
  kvc_freqkv_params freqkv = kvc_freqkv_params_default();
  kvc_faedkv_params faedkv = kvc_faedkv_params_default();
  kvc_fourier_params fourier = kvc_fourier_params_default();

  kvc_cache_desc desc(kvc_dtype dtype) const {
    kvc_cache_desc result = small_cache_desc(dtype, capacity);
    result.policy = policy;
    if (policy == KVC_POLICY_FREQKV) result.policy_params = &freqkv;
    else if (policy == KVC_POLICY_FAEDKV) result.policy_params = &faedkv, result.rope_style = KVC_ROPE_NONE;  // keys as stored
    else if (policy == KVC_POLICY_FOURIER) result.policy_params = &fourier, result.rope_style = KVC_ROPE_NONE;  // keys as stored
    else if (is_window_policy(policy)) result.policy_params = &window;
    else if (policy != KVC_POLICY_FULL) result.policy_params = &eviction;
    return result;
  }
  uint32_t prompt_tokens() const {
    uint32_t tokens = 0;
    for (uint32_t n : prompt_chunks) tokens += n;
    return tokens;
  }
  // The stream: the prompt's chunks, then one token per decode step.
  std::vector<uint32_t> chunks() const {
    std::vector<uint32_t> all = prompt_chunks;
    all.insert(all.end(), decode_tokens, 1u);
    return all;
  }
  uint32_t largest_chunk() const {
    uint32_t largest = 1;
    for (uint32_t n : prompt_chunks) largest = std::max(largest, n);
    return largest;
  }
};

inline std::vector<PolicyCase> policy_cases() {
  const std::vector<uint32_t> prompt = {13, 24, 9};  // 46 tokens
  std::vector<PolicyCase> cases;
  cases.push_back({"FULL", KVC_POLICY_FULL, 64, prompt, 4});
  // Cache size 24 with 2 sinks and 5 recent tokens: the 24-token chunk lands on 13 held slots,
  // so the attend after it evicts 13 (TREEKV: by blocks of 4), the 9-token chunk 9 more, and
  // every decode token one.
  kvc_eviction_params eviction = kvc_eviction_params_default();
  eviction.sinks = 2;
  eviction.recent_window = 5;
  eviction.chunk_slots = 24;
  eviction.prefill_block = 4;
  const std::pair<const char*, kvc_policy> eviction_policies[] = {
      {"STREAMING", KVC_POLICY_STREAMING}, {"H2O", KVC_POLICY_H2O}, {"TOVA", KVC_POLICY_TOVA}, {"TREEKV", KVC_POLICY_TREEKV}};
  for (const auto& [name, policy] : eviction_policies) {
    cases.push_back({name, policy, 24, prompt, 4});
    cases.back().eviction = eviction;
  }
  cases.push_back({"H2O, cache sizes growing with depth", KVC_POLICY_H2O, 28, prompt, 4});
  cases.back().eviction = eviction;
  cases.back().eviction.layer_capacities = kGrowingCacheSizes;
  // Budget 20 with a window of 6 under a 46-token prompt: every layer is compacted. decode_slots
  // is explicit for two policies (SNAPKV: exactly the decode tokens) and the default (64 - 46)
  // for the other two; PYRAMIDKV's schedule with beta 4 gives layers 31 and 9.
  const std::pair<const char*, kvc_policy> window_policies[] = {
      {"SNAPKV", KVC_POLICY_SNAPKV}, {"PYRAMIDKV", KVC_POLICY_PYRAMIDKV}, {"HITKV", KVC_POLICY_HITKV}, {"PHITKV", KVC_POLICY_PHITKV}};
  for (const auto& [name, policy] : window_policies) {
    PolicyCase c{name, policy, 64, prompt, 4};
    c.window.budget = 20;
    c.window.window = 6;
    c.window.pyramid_beta = 4.0f;
    if (policy == KVC_POLICY_SNAPKV) c.window.decode_slots = 4;
    if (policy == KVC_POLICY_HITKV) c.window.decode_slots = 7;
    if (policy == KVC_POLICY_PHITKV) c.window.layer_budgets = kGrowingLayerBudgets, c.window.num_layer_budgets = 2;
    cases.push_back(c);
  }
  // N = 40 with 4 sinks keeps 4 + 18 slots: 13 + 27 fill the window (compression), 11 + 7
  // fill it again (a second one), then decoding appends.
  cases.push_back({"FREQKV", KVC_POLICY_FREQKV, 40, {13, 27, 11, 7}, 4});
  // The authors' variant, recent tokens kept out of the transform: N = 41 with 4 sinks and 3
  // recent tokens keeps 4 + 17 + 3 slots, so the same chunk sizes fill the window twice.
  cases.push_back({"FREQKV, recent tokens", KVC_POLICY_FREQKV, 41, {13, 28, 10, 7}, 4});
  cases.back().freqkv.recent_tokens = 3;
  // 2 sinks, 5 recent tokens and 4 chunks: the 46-token prompt's middle of 39 tokens becomes
  // chunks 0 and 3 of its spectrum; the decode tokens fold the window's oldest in.
  cases.push_back({"FAEDKV", KVC_POLICY_FAEDKV, 64, prompt, 4});
  cases.back().faedkv.sinks = 2;
  cases.back().faedkv.recent_window = 5;
  cases.back().faedkv.chunks = 4;
  cases.back().faedkv.retain_ratio = 0.5f;
  // 2 sinks + 2 x 4 states + 6 local tokens < 46: the prompt ends compressed (a middle of 38),
  // and each decode token pushes one more into the coefficients.
  cases.push_back({"FOURIER", KVC_POLICY_FOURIER, 64, prompt, 4});
  cases.back().fourier.sinks = 2;
  cases.back().fourier.local_window = 6;
  cases.back().fourier.num_states = 4;
  return cases;
}

// The listed case of `policy`.
inline PolicyCase policy_case(kvc_policy policy) {
  for (const PolicyCase& c : policy_cases())
    if (c.policy == policy) return c;
  FAIL("no case lists policy ", policy);
  return {};
}

// Tokens each layer of a window policy keeps when the prompt ends (every layer is longer).
inline std::vector<uint32_t> window_layer_budgets(const PolicyCase& c, uint32_t num_layers) {
  if (c.window.layer_budgets) return std::vector<uint32_t>(c.window.layer_budgets, c.window.layer_budgets + c.window.num_layer_budgets);
  if (c.policy == KVC_POLICY_PYRAMIDKV || c.policy == KVC_POLICY_PHITKV)
    return pyramid_budgets(c.window.budget, c.window.window, num_layers, c.window.pyramid_beta, c.prompt_tokens() - c.window.window);
  return std::vector<uint32_t>(num_layers, c.window.budget);
}

// The storage part of a window policy's kvc_cache_stats.device_bytes_held (kvc.h: K, V and
// positions as allocated, the RoPE table, and the policy's own state, which the API does not
// show on its own): K, V and positions of every slot each layer allocates (bytes_per_slot
// each) plus the RoPE turn table (two uint32 words per rotated pair of dims, cache.cpp). Until
// the prompt ends every layer allocates `capacity` slots; then a compacted layer allocates
// budget + decode_slots.
inline uint64_t window_storage_bytes(const PolicyCase& c, const kvc_cache_desc& desc, uint64_t bytes_per_slot, bool prompt_ended) {
  const uint32_t rotated = desc.rope_style == KVC_ROPE_NONE ? 0 : desc.rope_dims ? desc.rope_dims : desc.head_dim;
  const uint64_t turn_table = uint64_t(rotated / 2) * 2 * sizeof(uint32_t);
  uint64_t slots = 0;
  if (!prompt_ended) {
    slots = uint64_t(desc.num_layers) * c.capacity;
  } else {
    const uint32_t decode_slots = c.window.decode_slots == KVC_DECODE_SLOTS_DEFAULT ? c.capacity - c.prompt_tokens() : c.window.decode_slots;
    for (uint32_t budget : window_layer_budgets(c, desc.num_layers)) {
      REQUIRE(budget < c.prompt_tokens());  // the layer is compacted
      slots += budget + decode_slots;
    }
  }
  return turn_table + slots * bytes_per_slot;
}

// ---------------------------------------------------------------- one cache, one path

enum class FeedPath {
  Host,         // kvc_cache_append / kvc_attend with host arrays; every call its own step
  Device,       // kvc_buffer_write, kvc_cache_append_device / kvc_attend_device, kvc_buffer_read; every call its own step
  OneStep,      // the device path, with every layer's calls of a chunk (and kvc_cache_end_prefill) in one step
  Decode,       // the one-step path, a decode token without scores taking kvc_decode_device
  Application,  // the device path in a step recorded into an application's command buffer (Vulkan only)
};

inline std::string path_name(FeedPath path) {
  switch (path) {
    case FeedPath::Host: return "host";
    case FeedPath::Device: return "device";
    case FeedPath::OneStep: return "one-step";
    case FeedPath::Decode: return "decode";
    case FeedPath::Application: return "application";
  }
  return "?";
}

// What one layer's attend of a chunk returned.
struct LayerResult {
  uint32_t slots = 0;              // slots the layer held when it attended (kvc_cache_layer_slots after the append;
                                   // 0 from kvc_decode_device, which appends and attends in one call)
  std::vector<unsigned char> out;  // [n][num_q_heads][head_dim] in the cache dtype
  std::vector<float> scores;       // [num_kv_heads][slots], empty when not asked for
};

inline uint64_t round_up(uint64_t bytes, uint64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

// Bytes of one chunk's tensors in a cache shaped by `desc`, for chunks of up to largest_chunk
// tokens: K or V, Q or the output, and the scores of every slot a layer may hold while it
// attends (its storage plus a chunk).
struct ChunkBytes {
  uint64_t kv, q, scores;
};
inline ChunkBytes chunk_bytes(const kvc_cache_desc& desc, uint32_t largest_chunk) {
  const uint64_t element = dtype_size(static_cast<Dtype>(desc.dtype));
  return {uint64_t(largest_chunk) * desc.num_kv_heads * desc.head_dim * element,
          uint64_t(largest_chunk) * desc.num_q_heads * desc.head_dim * element,
          uint64_t(desc.num_kv_heads) * (desc.capacity + largest_chunk) * sizeof(float)};
}

// A cache fed through one path (the application's path derives from it). The device paths
// keep K, V, Q, the output and the scores in one buffer, each at a non-zero multiple of the
// context's buffer_offset_alignment. The one-step path reuses these places for every layer of a
// step: each layer's inputs are written over the previous layer's after its calls were
// recorded, so only step order keeps them apart.
class CacheFeed {
 public:
  CacheFeed(kvc_context* context, const kvc_cache_desc& desc, FeedPath path, uint32_t largest_chunk)
      : context_(context), desc_(desc), path_(path), cache_(make_cache(context, desc)) {
    if (path_ == FeedPath::Host || path_ == FeedPath::Application) return;
    const ChunkBytes bytes = chunk_bytes(desc, largest_chunk);
    const uint64_t alignment = context_info(context).buffer_offset_alignment;
    uint64_t end = alignment;
    for (auto [place, size] : {std::pair{&k_, bytes.kv}, {&v_, bytes.kv}, {&q_, bytes.q}, {&out_, bytes.q}, {&scores_, bytes.scores}}) {
      place->offset = end;
      end = round_up(end + size, alignment);
    }
    buffer_ = make_buffer(context, end);
    for (kvc_buffer_view* place : {&k_, &v_, &q_, &out_, &scores_}) place->buffer = buffer_.get();
  }

  virtual ~CacheFeed() = default;
  kvc_cache* cache() const { return cache_.get(); }
  FeedPath path() const { return path_; }
  const std::vector<LayerResult>& results() const { return results_; }

  // Appends and attends one chunk of n tokens on every layer (inputs[layer]), scores when
  // asked, then ends the prompt when asked. The one-step path leaves its step ended but not
  // waited for: results() holds the outputs once wait() returned.
  virtual void feed(const std::vector<StepInputs>& inputs, uint32_t n, bool with_scores, bool end_prefill) {
    results_.assign(desc_.num_layers, LayerResult());
    const bool stepped = path_ == FeedPath::OneStep || path_ == FeedPath::Decode;
    if (stepped) require_ok(context_, kvc_step_begin(context_), "kvc_step_begin");
    for (uint32_t layer = 0; layer < desc_.num_layers; ++layer) {
      const StepInputs& in = inputs[layer];
      LayerResult& result = results_[layer];
      result.out.assign(in.q.size(), 0xff);  // NaN in f32 and in f16: an output never written fails
      if (path_ == FeedPath::Host) {
        require_ok(context_, kvc_cache_append(cache(), layer, n, desc_.dtype, in.k.data(), in.v.data()), "kvc_cache_append");
        result.slots = layer_slots(cache(), layer);
        result.scores.assign(with_scores ? size_t(desc_.num_kv_heads) * result.slots : 0, NAN);
        require_ok(context_,
                   kvc_attend(cache(), layer, n, desc_.dtype, in.q.data(), result.out.data(), with_scores ? result.scores.data() : nullptr),
                   "kvc_attend");
        continue;
      }
      require_ok(context_, kvc_buffer_write(buffer_.get(), k_.offset, in.k.size(), in.k.data()), "kvc_buffer_write k");
      require_ok(context_, kvc_buffer_write(buffer_.get(), v_.offset, in.v.size(), in.v.data()), "kvc_buffer_write v");
      require_ok(context_, kvc_buffer_write(buffer_.get(), q_.offset, in.q.size(), in.q.data()), "kvc_buffer_write q");
      if (path_ == FeedPath::Decode && n == 1 && !with_scores) {
        require_ok(context_, kvc_decode_device(cache(), layer, desc_.dtype, k_, v_, q_, out_), "kvc_decode_device");
        require_ok(context_, kvc_buffer_read(buffer_.get(), out_.offset, result.out.size(), result.out.data()), "kvc_buffer_read out");
        continue;
      }
      require_ok(context_, kvc_cache_append_device(cache(), layer, n, desc_.dtype, k_, v_), "kvc_cache_append_device");
      result.slots = layer_slots(cache(), layer);  // inside a step: the bookkeeping is already updated
      result.scores.assign(with_scores ? size_t(desc_.num_kv_heads) * result.slots : 0, NAN);
      require_ok(context_, kvc_attend_device(cache(), layer, n, desc_.dtype, q_, out_, with_scores ? scores_ : kvc_buffer_view{}),
                 "kvc_attend_device");
      require_ok(context_, kvc_buffer_read(buffer_.get(), out_.offset, result.out.size(), result.out.data()), "kvc_buffer_read out");
      if (with_scores)
        require_ok(context_, kvc_buffer_read(buffer_.get(), scores_.offset, result.scores.size() * sizeof(float), result.scores.data()),
                   "kvc_buffer_read scores");
    }
    if (end_prefill) require_ok(context_, kvc_cache_end_prefill(cache()), "kvc_cache_end_prefill");
    if (stepped) require_ok(context_, kvc_step_end(context_), "kvc_step_end");
  }

  void wait() const {
    if (path_ == FeedPath::OneStep || path_ == FeedPath::Decode) wait_step(context_);
  }

 protected:
  kvc_context* context_;
  kvc_cache_desc desc_;
  FeedPath path_;
  CachePtr cache_;
  std::vector<LayerResult> results_;

 private:
  BufferPtr buffer_;
  kvc_buffer_view k_{}, v_{}, q_{}, out_{}, scores_{};
};

// Every feed's results equal feeds[first]'s bit for bit.
inline void check_identical_results(const kvc_cache_desc& desc, const std::vector<CacheFeed*>& feeds, size_t first) {
  for (size_t f = first + 1; f < feeds.size(); ++f) {
    INFO(path_name(feeds[f]->path()), " path against the ", path_name(feeds[first]->path()), " path");
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
      INFO("layer ", layer);
      const LayerResult &got = feeds[f]->results()[layer], &expected = feeds[first]->results()[layer];
      if (got.slots != 0 && expected.slots != 0) CHECK(got.slots == expected.slots);
      CHECK(got.out == expected.out);
      CHECK(got.scores == expected.scores);
    }
  }
}

// What the stream's comparison sees after each chunk.
struct ChunkReport {
  std::string label;       // "prompt chunk 2 (24 tokens)", "decode token 1"
  bool contents_identical;  // false once FREQKV, FAEDKV or FOURIER transformed: their K/V differ by rounding between backends
  uint32_t n_tokens;        // the chunk's
};

// Feeds `c`'s stream (the same random inputs to every feed) chunk by chunk; the last prompt
// chunk ends the prompt, under every policy (those that do not act at its end ignore it). Scores are asked for on every other chunk
// (FAEDKV and FOURIER have none once the prompt ended). After each
// chunk, every feed's results go to `compare`, and a window policy's device bytes are checked
// against what it allocates. Returns every feed's layer snapshots, taken right after the last
// step ended: kvc_cache_read is its own step and waits for the one still running.
template <typename Compare>
std::vector<std::vector<LayerSnapshot>> feed_stream(const PolicyCase& c, const kvc_cache_desc& desc, const std::vector<CacheFeed*>& feeds,
                                                    Compare&& compare) {
  const std::vector<uint32_t> chunks = c.chunks();
  std::vector<std::vector<LayerSnapshot>> snapshots(feeds.size());
  for (size_t index = 0; index < chunks.size(); ++index) {
    const uint32_t n = chunks[index];
    const bool in_prompt = index < c.prompt_chunks.size(), ends_prompt = index + 1 == c.prompt_chunks.size();
    ChunkReport report{in_prompt ? "prompt chunk " + std::to_string(index) + " (" + std::to_string(n) + " tokens)"
                                 : "decode token " + std::to_string(index - c.prompt_chunks.size()),
                       !transforms_cache(c.policy) || cache_stats(feeds[0]->cache()).compressions == 0, n};
    INFO(c.name, " ", report.label);
    std::vector<StepInputs> inputs;
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) inputs.push_back(random_step_inputs(desc, n));
    std::vector<uint64_t> bytes_before;
    for (CacheFeed* feed : feeds) bytes_before.push_back(cache_stats(feed->cache()).device_bytes_held);
    const bool with_scores = index % 2 == 1 && (in_prompt || !scoreless_after_prompt(c.policy));
    for (CacheFeed* feed : feeds) feed->feed(inputs, n, with_scores, ends_prompt);
    if (index + 1 == chunks.size())
      for (size_t f = 0; f < feeds.size(); ++f)
        for (uint32_t layer = 0; layer < desc.num_layers; ++layer) snapshots[f].push_back(snapshot(feeds[f]->cache(), layer));
    for (CacheFeed* feed : feeds) feed->wait();
    compare(report, feeds);
    if (!is_window_policy(c.policy)) continue;
    // The storage follows the policy: capacity slots per layer through the prompt, then
    // budget + decode_slots per compacted layer; ending the prompt releases exactly the
    // difference (the policy's own state stays as it was), and nothing else moves.
    const bool prompt_ended = index + 1 >= c.prompt_chunks.size();
    for (size_t f = 0; f < feeds.size(); ++f) {
      const kvc_cache_stats stats = cache_stats(feeds[f]->cache());
      INFO(path_name(feeds[f]->path()), " path, prompt ended: ", prompt_ended);
      const uint64_t storage = window_storage_bytes(c, desc, stats.bytes_per_slot, prompt_ended);
      CHECK(stats.device_bytes_held >= storage);
      const uint64_t released = ends_prompt ? window_storage_bytes(c, desc, stats.bytes_per_slot, false) - storage : 0;
      CHECK(stats.device_bytes_held + released == bytes_before[f]);
    }
  }
  return snapshots;
}

// ---------------------------------------------------------------- checks both backends run

// kvc_buffer_write / kvc_buffer_read move exactly the bytes asked for, at any offset (only
// views need aligned offsets), outside a step and inside one, where a write takes the host
// bytes during the call and runs in the step's order with the reads around it. Ranges past
// the end are refused (KVC_ERROR_BUFFER_TOO_SMALL) and leave the buffer as it was.
inline void check_buffer_round_trip(kvc_context* context) {
  const uint64_t bytes = 1000;
  BufferPtr buffer = make_buffer(context, bytes);
  uint64_t size = 0;
  REQUIRE(kvc_buffer_size(buffer.get(), &size) == KVC_OK);
  CHECK(size == bytes);
  std::vector<unsigned char> model(bytes);  // what the buffer must hold
  for (unsigned char& byte : model) byte = static_cast<unsigned char>(rng()());
  require_ok(context, kvc_buffer_write(buffer.get(), 0, bytes, model.data()), "kvc_buffer_write");
  const auto read_all = [&] {
    std::vector<unsigned char> held(bytes);
    require_ok(context, kvc_buffer_read(buffer.get(), 0, bytes, held.data()), "kvc_buffer_read");
    return held;
  };
  const unsigned char patch[7] = {1, 2, 3, 4, 5, 6, 7};
  require_ok(context, kvc_buffer_write(buffer.get(), 3, sizeof(patch), patch), "kvc_buffer_write at 3");
  std::memcpy(&model[3], patch, sizeof(patch));
  require_ok(context, kvc_buffer_write(buffer.get(), bytes - 1, 1, patch), "kvc_buffer_write of the last byte");
  model[bytes - 1] = patch[0];
  CHECK(read_all() == model);
  std::vector<unsigned char> middle(5);
  require_ok(context, kvc_buffer_read(buffer.get(), 2, middle.size(), middle.data()), "kvc_buffer_read at 2");
  CHECK(std::equal(middle.begin(), middle.end(), model.begin() + 2));

  std::vector<unsigned char> spare(16, 0xee);
  CHECK(kvc_buffer_write(buffer.get(), bytes - 8, 9, spare.data()) == KVC_ERROR_BUFFER_TOO_SMALL);
  CHECK(kvc_buffer_write(buffer.get(), UINT64_MAX, 2, spare.data()) == KVC_ERROR_BUFFER_TOO_SMALL);
  CHECK(kvc_buffer_read(buffer.get(), bytes - 8, 9, spare.data()) == KVC_ERROR_BUFFER_TOO_SMALL);
  CHECK(std::string(kvc_context_last_error(context)).find("kvc_buffer_read") != std::string::npos);
  CHECK(kvc_buffer_write(buffer.get(), 0, 1, nullptr) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_buffer_read(buffer.get(), 0, 1, nullptr) == KVC_ERROR_NULL_POINTER);
  CHECK(std::all_of(spare.begin(), spare.end(), [](unsigned char byte) { return byte == 0xee; }));
  CHECK(read_all() == model);

  // In a step: write, read, write the same place again from the same (refilled) host array,
  // read again. Each read sees the write recorded before it.
  std::vector<unsigned char> source(64), first_read(64), second_read(64);
  std::vector<unsigned char> first(64), second(64);
  for (size_t i = 0; i < source.size(); ++i) first[i] = static_cast<unsigned char>(i), second[i] = static_cast<unsigned char>(200 - i);
  require_ok(context, kvc_step_begin(context), "kvc_step_begin");
  source = first;
  require_ok(context, kvc_buffer_write(buffer.get(), 101, source.size(), source.data()), "kvc_buffer_write in a step");
  require_ok(context, kvc_buffer_read(buffer.get(), 101, first_read.size(), first_read.data()), "kvc_buffer_read in a step");
  source = second;
  require_ok(context, kvc_buffer_write(buffer.get(), 101, source.size(), source.data()), "kvc_buffer_write in a step");
  require_ok(context, kvc_buffer_read(buffer.get(), 101, second_read.size(), second_read.data()), "kvc_buffer_read in a step");
  source.assign(source.size(), 0);  // the writes took their bytes during the calls
  require_ok(context, kvc_step_end(context), "kvc_step_end");
  wait_step(context);
  CHECK(first_read == first);
  CHECK(second_read == second);
  std::copy(second.begin(), second.end(), model.begin() + 101);
  CHECK(read_all() == model);
}

// Calls refused inside a step return their status, change nothing (slots, counters, bytes) and
// leave the step valid: after it ran, the cache equals a cache fed the same calls without the
// refused ones, and gives the same outputs. The step mixes the device path (layer 0) and the
// host path (layer 1). Also: what a step refuses outright, and kvc_step_end with none open.
inline void check_refusals_inside_step(kvc_context* context) {
  const kvc_cache_desc desc = small_cache_desc(KVC_DTYPE_F32, 16);
  CachePtr stepped = make_cache(context, desc), reference = make_cache(context, desc);
  const StepInputs prefix = random_step_inputs(desc, 5), chunk = random_step_inputs(desc, 3), too_many = random_step_inputs(desc, 12);
  for (kvc_cache* cache : {stepped.get(), reference.get()})
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer)
      require_ok(context, kvc_cache_append(cache, layer, 5, desc.dtype, prefix.k.data(), prefix.v.data()), "kvc_cache_append");
  std::vector<float> not_finite(chunk.k.size() / sizeof(float), 0.5f);
  not_finite[7] = NAN;

  const size_t kv_bytes = chunk.k.size(), q_bytes = chunk.q.size();
  const uint64_t alignment = context_info(context).buffer_offset_alignment;
  const uint64_t v_at = round_up(kv_bytes, alignment), q_at = 2 * v_at, out_at = q_at + round_up(q_bytes, alignment);
  BufferPtr buffer = make_buffer(context, out_at + q_bytes);
  const kvc_buffer_view k{buffer.get(), 0}, v{buffer.get(), v_at}, q{buffer.get(), q_at}, out{buffer.get(), out_at};
  std::vector<std::vector<unsigned char>> stepped_out(2, std::vector<unsigned char>(q_bytes, 0xff)), reference_out = stepped_out;

  const auto refused = [&](kvc_status expected, kvc_status got) {
    INFO("expected ", std::string(kvc_status_name(expected)), ", got ", outcome(context, got));
    CHECK(got == expected);
    CHECK(std::strlen(kvc_context_last_error(context)) > 0);
  };
  const auto bookkeeping = [&] {
    std::vector<uint64_t> state;
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) state.push_back(layer_slots(stepped.get(), layer));
    const kvc_cache_stats stats = cache_stats(stepped.get());
    state.insert(state.end(), {stats.tokens_seen, stats.slots_held, stats.device_bytes_held, stats.compressions});
    return state;
  };

  require_ok(context, kvc_step_begin(context), "kvc_step_begin");
  require_ok(context, kvc_buffer_write(buffer.get(), k.offset, kv_bytes, chunk.k.data()), "kvc_buffer_write k");
  require_ok(context, kvc_buffer_write(buffer.get(), v.offset, kv_bytes, chunk.v.data()), "kvc_buffer_write v");
  require_ok(context, kvc_buffer_write(buffer.get(), q.offset, q_bytes, chunk.q.data()), "kvc_buffer_write q");
  require_ok(context, kvc_cache_append_device(stepped.get(), 0, 3, desc.dtype, k, v), "kvc_cache_append_device");
  const std::vector<uint64_t> after_append = bookkeeping();
  refused(KVC_ERROR_CAPACITY, kvc_cache_append(stepped.get(), 0, 12, desc.dtype, too_many.k.data(), too_many.v.data()));
  refused(KVC_ERROR_NULL_POINTER, kvc_cache_append(stepped.get(), 1, 3, desc.dtype, nullptr, chunk.v.data()));
  refused(KVC_ERROR_NOT_FINITE, kvc_cache_append(stepped.get(), 1, 3, desc.dtype, not_finite.data(), chunk.v.data()));
  refused(KVC_ERROR_DTYPE_MISMATCH, kvc_cache_append_device(stepped.get(), 1, 3, KVC_DTYPE_F16, k, v));
  refused(KVC_ERROR_BUFFER_TOO_SMALL, kvc_attend_device(stepped.get(), 0, 3, desc.dtype, q, kvc_buffer_view{buffer.get(), out_at + alignment}, {}));
  refused(KVC_ERROR_NULL_POINTER, kvc_attend_device(stepped.get(), 0, 3, desc.dtype, q, kvc_buffer_view{}, {}));
  CHECK(bookkeeping() == after_append);
  require_ok(context, kvc_attend_device(stepped.get(), 0, 3, desc.dtype, q, out, {}), "kvc_attend_device");
  require_ok(context, kvc_buffer_read(buffer.get(), out.offset, q_bytes, stepped_out[0].data()), "kvc_buffer_read");
  require_ok(context, kvc_cache_append(stepped.get(), 1, 3, desc.dtype, chunk.k.data(), chunk.v.data()), "kvc_cache_append");
  require_ok(context, kvc_attend(stepped.get(), 1, 3, desc.dtype, chunk.q.data(), stepped_out[1].data(), nullptr), "kvc_attend");
  const std::vector<uint64_t> after_attend = bookkeeping();
  kvc_cache* created = reinterpret_cast<kvc_cache*>(0x1);
  refused(KVC_ERROR_BAD_STATE, kvc_cache_create(context, &desc, &created));
  CHECK(created == reinterpret_cast<kvc_cache*>(0x1));
  std::vector<float> room(size_t(16) * desc.num_kv_heads * desc.head_dim);
  refused(KVC_ERROR_BAD_STATE, kvc_cache_read(stepped.get(), 0, 16, desc.dtype, room.data(), nullptr, nullptr));
  refused(KVC_ERROR_BAD_STATE, kvc_cache_reset(stepped.get()));
  refused(KVC_ERROR_BAD_STATE, kvc_step_begin(context));  // one step at a time; this one stays open
  CHECK(bookkeeping() == after_attend);
  require_ok(context, kvc_step_end(context), "kvc_step_end");
  refused(KVC_ERROR_BAD_STATE, kvc_step_end(context));  // none open now
  wait_step(context);

  // The reference: the same successful calls on the host path, each its own step.
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
    require_ok(context, kvc_cache_append(reference.get(), layer, 3, desc.dtype, chunk.k.data(), chunk.v.data()), "kvc_cache_append");
    require_ok(context, kvc_attend(reference.get(), layer, 3, desc.dtype, chunk.q.data(), reference_out[layer].data(), nullptr), "kvc_attend");
  }
  CHECK(stepped_out == reference_out);
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer) CHECK(snapshot(stepped.get(), layer) == snapshot(reference.get(), layer));
  const kvc_cache_stats stepped_stats = cache_stats(stepped.get()), reference_stats = cache_stats(reference.get());
  CHECK(stepped_stats.tokens_seen == reference_stats.tokens_seen);
  CHECK(stepped_stats.slots_held == reference_stats.slots_held);
  CHECK(kvc_step_wait(context, 0) == KVC_OK);  // nothing left to wait for
}

}  // namespace kvc::test
