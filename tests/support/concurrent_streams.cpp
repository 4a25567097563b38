#include "support/concurrent_streams.h"

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "support/api_helpers.h"

namespace kvc::test {
namespace {

constexpr uint32_t kPrefillTokens = 16;
constexpr uint32_t kDecodeSteps = 40;  // past capacity 32: H2O evicts, FREQKV compresses

struct Stream {
  kvc_cache_desc desc;
  kvc_eviction_params eviction;                 // used by H2O
  std::vector<uint32_t> chunks;                 // tokens per step: the prompt, then 1 per decode step
  std::vector<std::vector<StepInputs>> inputs;  // [step][layer]
};

// What a run gives: every attention output, then every layer's K, V and positions; or the
// first call that failed. Filled on the stream's thread, checked on the test's.
struct RunResult {
  std::string failed_call;
  std::vector<unsigned char> bytes;
};

Stream make_stream(kvc_policy policy, kvc_dtype dtype, kvc_rope_style rope) {
  Stream stream;
  stream.desc = kvc_cache_desc_default();
  stream.desc.num_layers = 2;
  stream.desc.num_q_heads = 4;
  stream.desc.num_kv_heads = 2;
  stream.desc.head_dim = 32;
  stream.desc.dtype = dtype;
  stream.desc.capacity = 32;
  stream.desc.policy = policy;
  stream.desc.rope_style = rope;
  stream.eviction = kvc_eviction_params_default();
  stream.eviction.chunk_slots = kPrefillTokens;  // room for the prompt's one chunk
  stream.chunks.push_back(kPrefillTokens);
  stream.chunks.insert(stream.chunks.end(), kDecodeSteps, 1);
  for (uint32_t n : stream.chunks) {
    stream.inputs.emplace_back();
    for (uint32_t layer = 0; layer < stream.desc.num_layers; ++layer) stream.inputs.back().push_back(random_step_inputs(stream.desc, n));
  }
  return stream;
}

// Makes a context and a cache on the calling thread and runs the stream through them.
RunResult run_stream(kvc_backend backend, const Stream& stream) {
  RunResult result;
  const auto fail = [&](const std::string& call, kvc_context* context) {
    result.failed_call = call + (context ? std::string(": ") + kvc_context_last_error(context) : std::string());
    return result;
  };
  ContextPtr context = make_context(backend);
  if (!context) return fail("kvc_context_create", nullptr);
  kvc_cache_desc desc = stream.desc;
  desc.policy_params = desc.policy == KVC_POLICY_H2O ? &stream.eviction : nullptr;
  kvc_cache* raw_cache = nullptr;
  if (kvc_cache_create(context.get(), &desc, &raw_cache) != KVC_OK) return fail("kvc_cache_create", context.get());
  CachePtr cache(raw_cache);
  for (size_t step = 0; step < stream.chunks.size(); ++step) {
    const uint32_t n = stream.chunks[step];
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
      const StepInputs& in = stream.inputs[step][layer];
      std::vector<unsigned char> out(in.q.size());
      if (kvc_cache_append(cache.get(), layer, n, desc.dtype, in.k.data(), in.v.data()) != KVC_OK)
        return fail("kvc_cache_append", context.get());
      if (kvc_attend(cache.get(), layer, n, desc.dtype, in.q.data(), out.data(), nullptr) != KVC_OK)
        return fail("kvc_attend", context.get());
      result.bytes.insert(result.bytes.end(), out.begin(), out.end());
    }
  }
  const size_t element_bytes = desc.dtype == KVC_DTYPE_F16 ? 2 : 4;
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
    uint32_t slots = 0;
    if (kvc_cache_layer_slots(cache.get(), layer, &slots) != KVC_OK) return fail("kvc_cache_layer_slots", context.get());
    const size_t rows = size_t(slots) * desc.num_kv_heads;
    std::vector<unsigned char> k(rows * desc.head_dim * element_bytes), v(k.size()), positions(rows * sizeof(int32_t));
    if (kvc_cache_read(cache.get(), layer, slots, desc.dtype, k.data(), v.data(), reinterpret_cast<int32_t*>(positions.data())) != KVC_OK)
      return fail("kvc_cache_read", context.get());
    for (const auto* part : {&k, &v, &positions}) result.bytes.insert(result.bytes.end(), part->begin(), part->end());
  }
  return result;
}

}  // namespace

void check_two_contexts_in_two_threads(kvc_backend backend) {
  const Stream streams[2] = {make_stream(KVC_POLICY_H2O, KVC_DTYPE_F16, KVC_ROPE_NEOX),
                             make_stream(KVC_POLICY_FREQKV, KVC_DTYPE_F32, KVC_ROPE_NONE)};
  RunResult alone[2], together[2];
  for (int i = 0; i < 2; ++i) alone[i] = run_stream(backend, streams[i]);
  std::thread first([&] { together[0] = run_stream(backend, streams[0]); });
  std::thread second([&] { together[1] = run_stream(backend, streams[1]); });
  first.join();
  second.join();
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    REQUIRE(alone[i].failed_call == "");
    REQUIRE(together[i].failed_call == "");
    CHECK(!alone[i].bytes.empty());
    CHECK(together[i].bytes == alone[i].bytes);
  }
}

}  // namespace kvc::test
