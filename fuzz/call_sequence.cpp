#include "call_sequence.h"

#include <algorithm>
#include <cmath>

#include "cache_desc.h"
#include "cache_snapshot.h"
#include "check.h"
#include "picks.h"
#include "tensors.h"

namespace kvc::fuzz {
namespace {

constexpr size_t kMaxCalls = 48;       // per input: each input runs in milliseconds
constexpr size_t kMaxLiveCaches = 3;
// More tokens than any layer holds (capacity <= 2^28, chunk_slots <= 2^24): refused by the
// capacity check, which kvc.h promises runs before the data is read.
constexpr uint32_t kNeverHeld = 1u << 29;

// New calls last: the seed corpus's bytes keep naming the calls they were made for.
enum class Call { Create, Destroy, Append, Attend, Read, Prefill, Decode, EndPrefill, Reset, Inspect, Trim, AttendBatch, AppendBatch, Count };

// kvc.h: append checks layer, n_tokens and capacity, and attend its layer, n_queries and
// state, before reading their data. Only then does the fuzzer pass one-element buffers.
bool refused_before_reading(const kvc_cache_desc& desc, uint32_t layer, uint32_t count) {
  return layer >= desc.num_layers || count == 0 || count >= kNeverHeld;
}

uint32_t pick_layer(FuzzedDataProvider& data, const kvc_cache_desc& desc) {
  return pick_count(data, 0, desc.num_layers - 1, {desc.num_layers, UINT32_MAX});
}

uint32_t pick_tokens(FuzzedDataProvider& data) { return pick_count(data, 1, 12, {0, kNeverHeld, UINT32_MAX}); }

// The cache's dtype, or now and then the other one (refused with KVC_ERROR_DTYPE_MISMATCH).
kvc_dtype pick_dtype(FuzzedDataProvider& data, const kvc_cache_desc& desc) {
  if (!pick_rarely(data, 16)) return desc.dtype;
  return desc.dtype == KVC_DTYPE_F32 ? KVC_DTYPE_F16 : KVC_DTYPE_F32;
}

bool holds_only_finite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float value) { return std::isfinite(value); });
}

}  // namespace

CallSequence::~CallSequence() {
  for (const LiveCache& cache : caches_) kvc_cache_destroy(cache.handle);
}

template <typename Call>
kvc_status CallSequence::checked(const char* name, LiveCache& cache, Call&& call) {
  const CacheSnapshot before = take_snapshot(cache.handle, cache.desc);
  const kvc_status status = call();
  if (!is_call_status(status)) report_finding(name, "returned a value that is no kvc_status");
  if (status != KVC_OK) {
    if (kvc_context_last_error(context_)[0] == '\0') report_finding(name, "failed without a last-error message");
    if (!(take_snapshot(cache.handle, cache.desc) == before)) report_finding(name, "failed but changed the cache");
  } else if (cache.moderate && !holds_only_finite(take_snapshot(cache.handle, cache.desc), cache.desc.dtype)) {
    report_finding(name, "left NaN or Inf in a cache that only took moderate finite values");
  }
  return status;
}

void CallSequence::run(FuzzedDataProvider& data) {
  for (size_t call = 0; call < kMaxCalls && data.remaining_bytes() > 0; ++call) {
    const auto kind = static_cast<Call>(data.ConsumeIntegralInRange<int>(0, int(Call::Count) - 1));
    if (kind == Call::Create) {
      create(data);
      continue;
    }
    if (caches_.empty()) continue;
    if (kind == Call::Destroy) {
      destroy(data);
      continue;
    }
    LiveCache& cache = caches_[data.ConsumeIntegralInRange<size_t>(0, caches_.size() - 1)];
    switch (kind) {
      case Call::Append: append(data, cache, pick_layer(data, cache.desc), pick_tokens(data)); break;
      case Call::Attend: attend(data, cache, pick_layer(data, cache.desc), pick_tokens(data)); break;
      case Call::Read: read(data, cache); break;
      case Call::Prefill: prefill(data, cache, data.ConsumeIntegralInRange<uint32_t>(1, 16)); break;
      case Call::Decode: prefill(data, cache, 1); break;
      case Call::EndPrefill: checked("kvc_cache_end_prefill", cache, [&] { return kvc_cache_end_prefill(cache.handle); }); break;
      case Call::Reset:
        if (checked("kvc_cache_reset", cache, [&] { return kvc_cache_reset(cache.handle); }) == KVC_OK) cache.moderate = true;
        break;
      case Call::Trim: {
        // The context's work memory is the caches' to share, never their state.
        const CacheSnapshot before = take_snapshot(cache.handle, cache.desc);
        if (checked("kvc_context_trim", cache, [&] { return kvc_context_trim(context_); }) == KVC_OK &&
            !(take_snapshot(cache.handle, cache.desc) == before))
          report_finding("kvc_context_trim", "changed a cache");
        break;
      }
      case Call::AttendBatch: attend_batch(data, pick_layer(data, cache.desc)); break;
      case Call::AppendBatch: append_batch(data, pick_layer(data, cache.desc), pick_tokens(data)); break;
      default: inspect(data, cache); break;
    }
  }
}

void CallSequence::create(FuzzedDataProvider& data) {
  if (caches_.size() == kMaxLiveCaches) return;
  const FuzzedCacheDesc decoded(data);
  const bool null_desc = pick_rarely(data, 32);
  kvc_cache* handle = nullptr;
  const kvc_status status = kvc_cache_create(context_, null_desc ? nullptr : &decoded.desc(), &handle);
  if (!is_call_status(status)) report_finding("kvc_cache_create", "returned a value that is no kvc_status");
  if (status != KVC_OK) {
    if (kvc_context_last_error(context_)[0] == '\0') report_finding("kvc_cache_create", "failed without a last-error message");
    return;
  }
  if (!handle) report_finding("kvc_cache_create", "returned KVC_OK and no cache");
  LiveCache cache;
  cache.handle = handle;
  cache.desc = decoded.desc();
  cache.desc.policy_params = nullptr;
  caches_.push_back(cache);
}

void CallSequence::destroy(FuzzedDataProvider& data) {
  const size_t index = data.ConsumeIntegralInRange<size_t>(0, caches_.size() - 1);
  kvc_cache_destroy(caches_[index].handle);
  caches_.erase(caches_.begin() + index);
}

void CallSequence::append(FuzzedDataProvider& data, LiveCache& cache, uint32_t layer, uint32_t n_tokens) {
  const kvc_cache_desc& desc = cache.desc;
  const kvc_dtype dtype = pick_dtype(data, desc);
  const bool short_data = refused_before_reading(desc, layer, n_tokens) && (n_tokens >= kNeverHeld || pick_rarely(data, 2));
  const size_t elements = short_data ? 1 : size_t(n_tokens) * desc.num_kv_heads * desc.head_dim;
  FuzzedTensor k = make_tensor(data, dtype, elements);
  FuzzedTensor v = make_tensor(data, dtype, elements);
  const bool null_data = pick_rarely(data, 32);
  // What the cache holds once the call succeeds, which its check judges: huge finite values may
  // overflow on the way (a key rotated and rotated back, say). A refused call changes nothing.
  const bool was_moderate = cache.moderate;
  cache.moderate = was_moderate && !k.extreme && !v.extreme;
  const kvc_status status = checked("kvc_cache_append", cache, [&] {
    return kvc_cache_append(cache.handle, layer, n_tokens, dtype, null_data ? nullptr : k.data(), v.data());
  });
  if (status != KVC_OK) {
    cache.moderate = was_moderate;
    return;
  }
  if (short_data || null_data) report_finding("kvc_cache_append", "accepted a call that must be refused before reading its data");
  if (k.non_finite || v.non_finite) report_finding("kvc_cache_append", "accepted NaN or Inf");
}

void CallSequence::attend(FuzzedDataProvider& data, LiveCache& cache, uint32_t layer, uint32_t n_queries) {
  const kvc_cache_desc& desc = cache.desc;
  const kvc_dtype dtype = pick_dtype(data, desc);
  const bool short_data = refused_before_reading(desc, layer, n_queries) && (n_queries >= kNeverHeld || pick_rarely(data, 2));
  const size_t elements = short_data ? 1 : size_t(n_queries) * desc.num_q_heads * desc.head_dim;
  FuzzedTensor q = make_tensor(data, dtype, elements);
  std::vector<unsigned char> out = poisoned_bytes(dtype, elements);
  // kvc.h: scores are [num_kv_heads][slots held], slots held once the chunk was appended (now)
  uint32_t slots = 0;
  if (layer < desc.num_layers) kvc_cache_layer_slots(cache.handle, layer, &slots);
  const bool with_scores = pick_rarely(data, 2);
  std::vector<float> scores(with_scores ? size_t(desc.num_kv_heads) * slots : 0, -1.0f);
  const kvc_status status = checked("kvc_attend", cache, [&] {
    return kvc_attend(cache.handle, layer, n_queries, dtype, q.data(), out.data(), with_scores ? scores.data() : nullptr);
  });
  if (status != KVC_OK) return;
  if (short_data) report_finding("kvc_attend", "accepted a call that must be refused before reading its data");
  if (q.non_finite) report_finding("kvc_attend", "accepted NaN or Inf");
  if (!cache.moderate || q.extreme) return;
  if (!holds_only_finite(out, dtype)) report_finding("kvc_attend", "wrote NaN or Inf from moderate finite inputs");
  if (!holds_only_finite(scores)) report_finding("kvc_attend", "wrote NaN or Inf scores from moderate finite inputs");
  if (std::any_of(scores.begin(), scores.end(), [](float score) { return score < 0.0f; }))
    report_finding("kvc_attend", "left a score unwritten or wrote a negative probability");
}

std::vector<CallSequence::LiveCache*> CallSequence::pick_batch(FuzzedDataProvider& data) {
  const uint32_t n = data.ConsumeIntegralInRange<uint32_t>(1, 3);
  std::vector<LiveCache*> picked;
  for (uint32_t i = 0; i < n; ++i) picked.push_back(&caches_[data.ConsumeIntegralInRange<size_t>(0, caches_.size() - 1)]);
  return picked;
}

kvc_buffer_view CallSequence::device_copy(const std::vector<unsigned char>& bytes, std::vector<BufferPtr>& buffers) {
  kvc_buffer* buffer = nullptr;
  if (kvc_buffer_create(context_, bytes.size(), &buffer) != KVC_OK) return {nullptr, 0};
  buffers.emplace_back(buffer);
  kvc_buffer_write(buffer, 0, bytes.size(), bytes.data());
  return {buffer, 0};
}

bool CallSequence::batch_succeeded(const char* name, kvc_status status, const std::vector<LiveCache*>& picked,
                                   const std::vector<CacheSnapshot>& before) {
  if (!is_call_status(status)) report_finding(name, "returned a value that is no kvc_status");
  if (status != KVC_OK) {
    if (kvc_context_last_error(context_)[0] == '\0') report_finding(name, "failed without a last-error message");
    for (size_t i = 0; i < picked.size(); ++i)
      if (!(take_snapshot(picked[i]->handle, picked[i]->desc) == before[i])) report_finding(name, "failed but changed a cache");
    return false;
  }
  for (size_t i = 0; i < picked.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (picked[i] == picked[j]) report_finding(name, "accepted a cache listed twice");
  return true;
}

void CallSequence::attend_batch(FuzzedDataProvider& data, uint32_t layer) {
  // One to three live caches, now and then the same one twice (refused): each with its Q (1
  // token), out and, rarely, scores in device buffers; now and then a view too small.
  const std::vector<LiveCache*> picked = pick_batch(data);
  const kvc_dtype dtype = pick_dtype(data, picked.front()->desc);
  std::vector<kvc_cache*> handles;
  std::vector<CacheSnapshot> before;
  std::vector<BufferPtr> buffers;
  std::vector<kvc_buffer_view> q, out, scores;
  bool moderate = true;
  bool short_view = false;  // a Q or out view holds less than the cache's token needs
  for (LiveCache* cache : picked) {
    const kvc_cache_desc& desc = cache->desc;
    handles.push_back(cache->handle);
    before.push_back(take_snapshot(cache->handle, desc));
    moderate = moderate && cache->moderate;
    const size_t elements = size_t(desc.num_q_heads) * desc.head_dim;
    FuzzedTensor query = make_tensor(data, dtype, elements);
    moderate = moderate && !query.extreme && !query.non_finite;  // device inputs are not checked (kvc.h)
    if (pick_rarely(data, 16)) query.bytes.resize(element_bytes(dtype));
    short_view = short_view || query.bytes.size() < elements * element_bytes(dtype);
    q.push_back(device_copy(query.bytes, buffers));
    out.push_back(device_copy(query.bytes, buffers));
    if (!q.back().buffer || !out.back().buffer) return;
    kvc_buffer* score_buffer = nullptr;
    uint32_t slots = 0;
    if (layer < desc.num_layers) kvc_cache_layer_slots(cache->handle, layer, &slots);
    const uint64_t score_bytes = std::max<uint64_t>(4, uint64_t(desc.num_kv_heads) * slots * 4);
    if (pick_rarely(data, 4) && kvc_buffer_create(context_, score_bytes, &score_buffer) == KVC_OK) buffers.emplace_back(score_buffer);
    scores.push_back({score_buffer, 0});
  }
  const uint32_t n = static_cast<uint32_t>(picked.size());
  const kvc_status status = kvc_attend_batch_device(context_, n, handles.data(), layer, dtype, q.data(), out.data(), scores.data());
  if (!batch_succeeded("kvc_attend_batch_device", status, picked, before)) return;
  if (short_view) report_finding("kvc_attend_batch_device", "accepted a Q or out view smaller than a token's");
  if (!moderate) return;
  for (size_t i = 0; i < picked.size(); ++i) {
    const kvc_cache_desc& desc = picked[i]->desc;
    std::vector<unsigned char> written(size_t(desc.num_q_heads) * desc.head_dim * element_bytes(dtype));
    if (kvc_buffer_read(out[i].buffer, 0, written.size(), written.data()) == KVC_OK && !holds_only_finite(written, dtype))
      report_finding("kvc_attend_batch_device", "wrote NaN or Inf from moderate finite inputs");
  }
}

void CallSequence::append_batch(FuzzedDataProvider& data, uint32_t layer, uint32_t n_tokens) {
  // One to three live caches, now and then the same one twice (refused): each with its chunk's
  // K and V in device buffers; now and then a view too small, and short views wherever the
  // count or the capacity must refuse the call first.
  const std::vector<LiveCache*> picked = pick_batch(data);
  const kvc_dtype dtype = pick_dtype(data, picked.front()->desc);
  std::vector<kvc_cache*> handles;
  std::vector<CacheSnapshot> before;
  std::vector<BufferPtr> buffers;
  std::vector<kvc_buffer_view> k, v;
  std::vector<bool> moderate;  // per cache: its chunk held moderate values only
  bool refused_first = false;  // a cache's count or capacity check refuses the call before its views
  bool short_view = false;     // a K or V view holds less than its chunk
  for (LiveCache* cache : picked) {
    const kvc_cache_desc& desc = cache->desc;
    handles.push_back(cache->handle);
    before.push_back(take_snapshot(cache->handle, desc));
    const bool refused = refused_before_reading(desc, layer, n_tokens);
    refused_first = refused_first || refused;
    const bool short_data = refused && (n_tokens >= kNeverHeld || pick_rarely(data, 2));
    const size_t elements = short_data ? 1 : std::max<size_t>(1, size_t(n_tokens) * desc.num_kv_heads * desc.head_dim);
    FuzzedTensor keys = make_tensor(data, dtype, elements), values = make_tensor(data, dtype, elements);
    // Device inputs are not checked (kvc.h): NaN, Inf or huge values make the cache immoderate.
    moderate.push_back(!keys.extreme && !keys.non_finite && !values.extreme && !values.non_finite);
    if (pick_rarely(data, 16)) values.bytes.resize(element_bytes(dtype));
    const size_t chunk_bytes = size_t(n_tokens) * desc.num_kv_heads * desc.head_dim * element_bytes(dtype);
    short_view = short_view || keys.bytes.size() < chunk_bytes || values.bytes.size() < chunk_bytes;
    k.push_back(device_copy(keys.bytes, buffers));
    v.push_back(device_copy(values.bytes, buffers));
    if (!k.back().buffer || !v.back().buffer) return;
  }
  const uint32_t n = static_cast<uint32_t>(picked.size());
  const kvc_status status = kvc_cache_append_batch_device(context_, n, handles.data(), layer, n_tokens, dtype, k.data(), v.data());
  if (!batch_succeeded("kvc_cache_append_batch_device", status, picked, before)) return;
  if (refused_first) report_finding("kvc_cache_append_batch_device", "accepted a call that must be refused before reading its data");
  if (short_view) report_finding("kvc_cache_append_batch_device", "accepted a K or V view smaller than its chunk");
  for (size_t i = 0; i < picked.size(); ++i) {
    LiveCache& cache = *picked[i];
    cache.moderate = cache.moderate && moderate[i];
    if (cache.moderate && !holds_only_finite(take_snapshot(cache.handle, cache.desc), cache.desc.dtype))
      report_finding("kvc_cache_append_batch_device", "left NaN or Inf in a cache that only took moderate finite values");
  }
}

void CallSequence::read(FuzzedDataProvider& data, LiveCache& cache) {
  const kvc_cache_desc& desc = cache.desc;
  const uint32_t layer = pick_layer(data, desc);
  uint32_t slots = 0;
  if (layer < desc.num_layers) kvc_cache_layer_slots(cache.handle, layer, &slots);
  // max_slots is the room each output has (kvc.h): around what the layer holds, sometimes less
  const uint32_t max_slots = std::max<int64_t>(0, int64_t(slots) + data.ConsumeIntegralInRange<int>(-2, 3));
  const kvc_dtype dtype = pick_dtype(data, desc);
  const size_t rows = size_t(max_slots) * desc.num_kv_heads;
  std::vector<unsigned char> k = poisoned_bytes(dtype, rows * desc.head_dim);
  std::vector<unsigned char> v = poisoned_bytes(dtype, rows * desc.head_dim);
  std::vector<int32_t> positions(rows, -7);
  const bool with_k = !pick_rarely(data, 4), with_v = !pick_rarely(data, 4), with_positions = !pick_rarely(data, 4);
  const CacheSnapshot before = take_snapshot(cache.handle, desc);
  const kvc_status status = checked("kvc_cache_read", cache, [&] {
    return kvc_cache_read(cache.handle, layer, max_slots, dtype, with_k ? k.data() : nullptr, with_v ? v.data() : nullptr,
                          with_positions ? positions.data() : nullptr);
  });
  if (!(take_snapshot(cache.handle, desc) == before)) report_finding("kvc_cache_read", "changed the cache");
  if (status == KVC_OK && max_slots < slots) report_finding("kvc_cache_read", "accepted max_slots below the layer's slots");
}

void CallSequence::inspect(FuzzedDataProvider& data, LiveCache& cache) {
  kvc_cache_stats stats{};
  stats.struct_size = pick_rarely(data, 8) ? data.ConsumeIntegralInRange<uint32_t>(0, sizeof(stats)) : sizeof(stats);
  const kvc_status stats_status = kvc_cache_stats_get(cache.handle, &stats);
  if (!is_call_status(stats_status)) report_finding("kvc_cache_stats_get", "returned a value that is no kvc_status");
  uint32_t slots = 0;
  const uint32_t layer = pick_layer(data, cache.desc);
  const kvc_status slots_status = kvc_cache_layer_slots(cache.handle, layer, &slots);
  if ((slots_status == KVC_OK) != (layer < cache.desc.num_layers))
    report_finding("kvc_cache_layer_slots", "disagrees with num_layers on whether the layer exists");
}

void CallSequence::prefill(FuzzedDataProvider& data, LiveCache& cache, uint32_t n_tokens) {
  const uint32_t n_queries = data.ConsumeIntegralInRange<uint32_t>(1, n_tokens);
  for (uint32_t layer = 0; layer < cache.desc.num_layers; ++layer) {
    append(data, cache, layer, n_tokens);
    attend(data, cache, layer, n_queries);
  }
}

}  // namespace kvc::fuzz
