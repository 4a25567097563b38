#include "engine_session.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>

#include "api/handles.h"  // the context's Backend, for the GPU time of its submissions
#include "common/dtype.h"

namespace kvc::bench {
namespace {

using Clock = std::chrono::steady_clock;

double microseconds_since(Clock::time_point start) { return std::chrono::duration<double, std::micro>(Clock::now() - start).count(); }

std::vector<uint16_t> random_halves(size_t count, std::mt19937& generator) {
  std::uniform_real_distribution<float> values(-1.0f, 1.0f);
  std::vector<uint16_t> halves(count);
  for (uint16_t& half : halves) half = float_to_half(values(generator));
  return halves;
}

}  // namespace

const char* path_name(EnginePath path) {
  switch (path) {
    case EnginePath::Host: return "host";
    case EnginePath::Device: return "device";
    case EnginePath::Step: return "step";
    case EnginePath::Decode: return "decode";
    case EnginePath::StepChain: return "step_chain";
    case EnginePath::DecodeChain: return "decode_chain";
  }
  return "?";
}

EngineSession::EngineSession(const EngineShape& shape, uint32_t max_tokens) : shape_(shape), max_tokens_(max_tokens) {
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = KVC_BACKEND_VULKAN;
  kvc_context* context = nullptr;
  const kvc_status created = kvc_context_create(&desc, &context);
  require(created == KVC_OK, created, std::string("kvc_context_create: ") + kvc_last_create_error());
  context_.reset(context);
  std::mt19937 generator(1234);
  kv_host_ = random_halves(size_t(max_tokens) * shape.kv_heads * shape.head_dim, generator);
  q_host_ = random_halves(size_t(max_tokens) * shape.q_heads * shape.head_dim, generator);
  out_host_.resize(q_host_.size());
  kv_ = create_buffer(kv_host_);
  q_ = create_buffer(q_host_);
  out_ = create_buffer(out_host_);
  chain_out_ = create_buffer(out_host_);
}

EngineSession::BufferPtr EngineSession::create_buffer(const std::vector<uint16_t>& values) {
  const uint64_t bytes = values.size() * sizeof(uint16_t);
  kvc_buffer* buffer = nullptr;
  check(kvc_buffer_create(context_.get(), bytes, &buffer), "kvc_buffer_create");
  BufferPtr owned(buffer, kvc_buffer_destroy);
  check(kvc_buffer_write(buffer, 0, bytes, values.data()), "kvc_buffer_write");
  return owned;
}

void EngineSession::check(kvc_status status, const char* call) const {
  require(status == KVC_OK, status, std::string(call) + ": " + kvc_context_last_error(context_.get()));
}

double EngineSession::last_submission_gpu_us() const { return context_->backend->last_submission_gpu_us(); }

CachePtr EngineSession::create_cache(kvc_policy policy, uint32_t capacity, const void* policy_params) {
  kvc_cache_desc desc = kvc_cache_desc_default();
  desc.num_layers = shape_.layers;
  desc.num_q_heads = shape_.q_heads;
  desc.num_kv_heads = shape_.kv_heads;
  desc.head_dim = shape_.head_dim;
  desc.dtype = KVC_DTYPE_F16;
  desc.capacity = capacity;
  desc.policy = policy;
  // FAEDKV and FOURIER transform keys as the model stores them (after its RoPE).
  desc.rope_style = policy == KVC_POLICY_FAEDKV || policy == KVC_POLICY_FOURIER ? KVC_ROPE_NONE : KVC_ROPE_NEOX;
  desc.rope_theta = 10000.0f;
  desc.policy_params = policy_params;
  kvc_cache* cache = nullptr;
  check(kvc_cache_create(context_.get(), &desc, &cache), "kvc_cache_create");
  return CachePtr(cache, kvc_cache_destroy);
}

void EngineSession::fill(kvc_cache* cache, uint32_t tokens) {
  const kvc_buffer_view kv{kv_.get(), 0};
  for (uint32_t done = 0; done < tokens; done += max_tokens_) {
    const uint32_t n = std::min(max_tokens_, tokens - done);
    for (uint32_t layer = 0; layer < shape_.layers; ++layer)
      check(kvc_cache_append_device(cache, layer, n, KVC_DTYPE_F16, kv, kv), "kvc_cache_append_device");
  }
}

void EngineSession::reset(kvc_cache* cache) { check(kvc_cache_reset(cache), "kvc_cache_reset"); }

void EngineSession::refill(kvc_cache* cache, uint32_t tokens) {
  reset(cache);
  fill(cache, tokens);
}

RunTimes EngineSession::run_step(kvc_cache* cache, EnginePath path, uint32_t n, bool end_prefill) {
  const kvc_buffer_view no_scores{nullptr, 0};
  const bool step = path != EnginePath::Host && path != EnginePath::Device;
  const bool chained = path == EnginePath::StepChain || path == EnginePath::DecodeChain;
  const bool decode = n == 1 && (path == EnginePath::Decode || path == EnginePath::DecodeChain);
  // A chained layer's K takes the first kv_heads rows of the output before it, V the next.
  const uint64_t kv_bytes = uint64_t(n) * shape_.kv_heads * shape_.head_dim * sizeof(uint16_t);
  require(!chained || 2 * kv_bytes <= out_host_.size() * sizeof(uint16_t), KVC_ERROR_INVALID_ARGUMENT,
          "run_step: a chained layer's K and V do not fit the output of the layer before");
  kvc_buffer* const outs[2] = {out_.get(), chain_out_.get()};
  double gpu_us = 0;
  // Outside a step every call is a submission of its own, waited for: its GPU time is known
  // when it returns.
  const auto call = [&](kvc_status status, const char* name) {
    check(status, name);
    if (!step) gpu_us += last_submission_gpu_us();
  };
  const Clock::time_point start = Clock::now();
  if (step) check(kvc_step_begin(context_.get()), "kvc_step_begin");
  for (uint32_t layer = 0; layer < shape_.layers; ++layer) {
    if (path == EnginePath::Host) {
      call(kvc_cache_append(cache, layer, n, KVC_DTYPE_F16, kv_host_.data(), kv_host_.data()), "kvc_cache_append");
      call(kvc_attend(cache, layer, n, KVC_DTYPE_F16, q_host_.data(), out_host_.data(), nullptr), "kvc_attend");
      continue;
    }
    const bool from_output = chained && layer > 0;
    kvc_buffer* const before = outs[(layer + 1) % 2];
    const kvc_buffer_view k = from_output ? kvc_buffer_view{before, 0} : kvc_buffer_view{kv_.get(), 0};
    const kvc_buffer_view v = from_output ? kvc_buffer_view{before, kv_bytes} : k;
    const kvc_buffer_view q = from_output ? kvc_buffer_view{before, 0} : kvc_buffer_view{q_.get(), 0};
    const kvc_buffer_view out{chained ? outs[layer % 2] : out_.get(), 0};
    if (decode) {
      call(kvc_decode_device(cache, layer, KVC_DTYPE_F16, k, v, q, out), "kvc_decode_device");
      continue;
    }
    call(kvc_cache_append_device(cache, layer, n, KVC_DTYPE_F16, k, v), "kvc_cache_append_device");
    call(kvc_attend_device(cache, layer, n, KVC_DTYPE_F16, q, out, no_scores), "kvc_attend_device");
  }
  if (end_prefill) call(kvc_cache_end_prefill(cache), "kvc_cache_end_prefill");
  if (!step) return {gpu_us, 0.0};
  check(kvc_step_end(context_.get()), "kvc_step_end");
  const double record_us = microseconds_since(start);
  check(kvc_step_wait(context_.get(), UINT64_MAX), "kvc_step_wait");
  return {last_submission_gpu_us(), record_us};
}

RunTimes EngineSession::run_batch_step(const std::vector<kvc_cache*>& caches, bool batched) {
  const uint32_t count = static_cast<uint32_t>(caches.size());
  const uint64_t query_bytes = uint64_t(shape_.q_heads) * shape_.head_dim * sizeof(uint16_t);
  require(uint64_t(count) * query_bytes <= out_host_.size() * sizeof(uint16_t), KVC_ERROR_CAPACITY,
          "run_batch_step: more caches than the session's output buffer holds rows");
  // Every cache reads the same query; each writes its own output row.
  const kvc_buffer_view no_scores{nullptr, 0};
  const std::vector<kvc_buffer_view> kv(count, kvc_buffer_view{kv_.get(), 0});
  const std::vector<kvc_buffer_view> queries(count, kvc_buffer_view{q_.get(), 0});
  std::vector<kvc_buffer_view> outputs;
  for (uint32_t i = 0; i < count; ++i) outputs.push_back({out_.get(), i * query_bytes});
  const Clock::time_point start = Clock::now();
  check(kvc_step_begin(context_.get()), "kvc_step_begin");
  for (uint32_t layer = 0; layer < shape_.layers; ++layer) {
    if (batched) {
      check(kvc_cache_append_batch_device(context_.get(), count, caches.data(), layer, 1, KVC_DTYPE_F16, kv.data(), kv.data()),
            "kvc_cache_append_batch_device");
      check(kvc_attend_batch_device(context_.get(), count, caches.data(), layer, KVC_DTYPE_F16, queries.data(), outputs.data(), nullptr),
            "kvc_attend_batch_device");
      continue;
    }
    for (uint32_t i = 0; i < count; ++i) {
      check(kvc_cache_append_device(caches[i], layer, 1, KVC_DTYPE_F16, kv[i], kv[i]), "kvc_cache_append_device");
      check(kvc_attend_device(caches[i], layer, 1, KVC_DTYPE_F16, queries[i], outputs[i], no_scores), "kvc_attend_device");
    }
  }
  check(kvc_step_end(context_.get()), "kvc_step_end");
  const double record_us = microseconds_since(start);
  check(kvc_step_wait(context_.get(), UINT64_MAX), "kvc_step_wait");
  return {last_submission_gpu_us(), record_us};
}

double EngineSession::end_prefill(kvc_cache* cache) {
  check(kvc_cache_end_prefill(cache), "kvc_cache_end_prefill");
  return last_submission_gpu_us();
}

void EngineSession::end_open_step() {
  // Statuses ignored: with no step open kvc_step_end refuses (KVC_ERROR_BAD_STATE), as it should.
  if (kvc_step_end(context_.get()) == KVC_OK) kvc_step_wait(context_.get(), UINT64_MAX);
}

}  // namespace kvc::bench
