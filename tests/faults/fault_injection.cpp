// The fault-injection suite (KVC_FAULT_INJECTION builds; docs/reliability.md, "Fault
// injection"). For every policy, a tiny scenario of C API calls (cache creation, host appends
// and attends of the prompt, kvc_cache_end_prefill, a decode token on the device path, one in a
// one-submission step, a second cache given the prompt and its end in one step and a token of
// both through kvc_cache_append_batch_device and kvc_attend_batch_device, kvc_cache_read,
// kvc_cache_reset and a token after it) runs three times on one Vulkan context: a reference run, a counting run (how many operations
// of each kind each call reaches, and the same results bit for bit), and the faulted run, where
// every call is first made to fail at its n-th operation of each kind, for every n it reaches,
// before it runs for real. After each injected failure the call must return an error status
// with a message, the caches must read back (kvc_cache_read: K, V, positions; stats) exactly as
// before the call, and the run must end with the reference's results. Pipeline creation (cached
// per context) is faulted on fresh contexts; a lost device (submission, fence wait) on fresh
// contexts too, after which every call is refused with KVC_ERROR_DEVICE_LOST and every handle
// still destroys. LeakSanitizer (the CI build) checks that nothing leaks.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "api/handles.h"
#include "kvc/kvc.h"
#include "support/api_helpers.h"
#include "support/engine_paths.h"
#include "support/test_support.h"
#include "vulkan/device.h"
#include "vulkan/faults.h"

namespace {

using namespace kvc::test;
namespace faults = kvc::vk::faults;
using faults::Op;

constexpr size_t kOps = size_t(Op::Count);

// The error each kind of call really returns that the faulted run injects (the device-lost
// pass injects VK_ERROR_DEVICE_LOST into submissions and fence waits).
VkResult recoverable_error(Op op) {
  switch (op) {
    case Op::MapMemory: return VK_ERROR_MEMORY_MAP_FAILED;
    default: return VK_ERROR_OUT_OF_DEVICE_MEMORY;
  }
}

// Kinds the faulted run injects on its warm context (a fence wait fails only with a lost
// device). Pipelines are cached per context and the staging memory, the one mapped, grows only
// at a context's first uploads: those two are faulted on fresh contexts (kColdOps). VkFFT plans
// are made per cache, so the warm run faults them too (as CreatePipeline).
constexpr Op kWarmOps[] = {Op::AllocateMemory, Op::MapMemory, Op::AllocateDescriptorSet, Op::QueueSubmit, Op::CreatePipeline};
constexpr Op kColdOps[] = {Op::CreatePipeline, Op::MapMemory};

ContextPtr vulkan_context() {
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = KVC_BACKEND_VULKAN;
  kvc_context* context = nullptr;
  REQUIRE(kvc_context_create(&desc, &context) == KVC_OK);
  return ContextPtr(context);
}

// What a cache reads back as: every layer's kvc_cache_read, and its stats.
struct CacheState {
  std::vector<LayerSnapshot> layers;
  kvc_cache_stats stats{};
  bool operator==(const CacheState& other) const {
    return layers == other.layers && stats.tokens_seen == other.stats.tokens_seen && stats.slots_held == other.stats.slots_held &&
           stats.device_bytes_held == other.stats.device_bytes_held && stats.compressions == other.stats.compressions;
  }
};

CacheState read_state(kvc_cache* cache, uint32_t num_layers) {
  CacheState state;
  for (uint32_t layer = 0; layer < num_layers; ++layer) state.layers.push_back(snapshot(cache, layer));
  state.stats = cache_stats(cache);
  return state;
}

// Every cache of a run, as read back.
using RunState = std::vector<CacheState>;

// One policy's scenario: its calls, and the inputs every run feeds them.
struct Scenario {
  PolicyCase policy;
  kvc_cache_desc desc{};
  std::vector<std::vector<StepInputs>> prompt;  // [chunk][layer]
  // [token][layer]: token 0 the device path, 1 a step, 2 after the reset, 3 the batch's
  std::vector<std::vector<StepInputs>> decode;
};

// A run of the scenario on one context: the cache, a second cache for the batched attend, a
// device buffer with one token's K, V, Q, output, scores and the second cache's output per
// layer, and what every call returned.
class Run {
 public:
  Run(kvc_context* context, const Scenario& scenario) : context_(context), s_(scenario) {
    const uint64_t alignment = context_info(context).buffer_offset_alignment;
    const ChunkBytes bytes = chunk_bytes(s_.desc, 1);
    for (uint64_t size : {bytes.kv, bytes.kv, bytes.q, bytes.q, bytes.scores, bytes.q}) {
      places_.push_back(end_);
      end_ = round_up(end_ + size, alignment);
    }
    layer_bytes_ = end_;
    buffer_ = make_buffer(context, layer_bytes_ * s_.desc.num_layers);
  }

  kvc_context* context() const { return context_; }
  kvc_cache* cache() const { return cache_.get(); }

  // What every cache the run has made reads back as.
  RunState state() const {
    RunState state;
    for (kvc_cache* made : {cache_.get(), second_.get()})
      if (made) state.push_back(read_state(made, s_.desc.num_layers));
    return state;
  }
  const std::vector<std::vector<unsigned char>>& outputs() const { return outputs_; }

  // The scenario's calls, each a function returning its status; `record` keeps what it returned.
  struct Call {
    std::string name;
    std::function<kvc_status()> run;
    std::function<void()> setup;   // unfaulted: inputs into the device buffer
    std::function<void()> record;  // unfaulted, after success: outputs
  };

  std::vector<Call> calls() {
    std::vector<Call> calls;
    const kvc_cache_desc& d = s_.desc;
    calls.push_back({"kvc_cache_create", [this] {
                       kvc_cache* cache = nullptr;
                       const kvc_status status = kvc_cache_create(context_, &s_.desc, &cache);
                       if (status == KVC_OK) cache_.reset(cache);
                       CHECK((status == KVC_OK) == (cache != nullptr));
                       return status;
                     }});
    for (size_t chunk = 0; chunk < s_.prompt.size(); ++chunk) {
      const uint32_t n = s_.policy.prompt_chunks[chunk];
      const bool scores = chunk % 2 == 1;
      for (uint32_t layer = 0; layer < d.num_layers; ++layer) {
        const StepInputs& in = s_.prompt[chunk][layer];
        const std::string at = " chunk " + std::to_string(chunk) + " layer " + std::to_string(layer);
        calls.push_back({"kvc_cache_append" + at, [this, layer, n, &in] { return kvc_cache_append(cache(), layer, n, s_.desc.dtype, in.k.data(), in.v.data()); }});
        auto out = std::make_shared<std::vector<unsigned char>>(in.q.size());
        auto score_values = std::make_shared<std::vector<float>>();
        calls.push_back({"kvc_attend" + at,
                         [this, layer, n, &in, out, score_values, scores] {
                           score_values->assign(scores ? size_t(s_.desc.num_kv_heads) * layer_slots(cache(), layer) : 0, NAN);
                           return kvc_attend(cache(), layer, n, s_.desc.dtype, in.q.data(), out->data(), scores ? score_values->data() : nullptr);
                         },
                         nullptr, [this, out, score_values] { keep(*out, *score_values); }});
      }
    }
    calls.push_back({"kvc_cache_end_prefill", [this] { return kvc_cache_end_prefill(cache()); }});
    for (uint32_t layer = 0; layer < d.num_layers; ++layer) {
      const std::string at = " layer " + std::to_string(layer);
      calls.push_back({"kvc_cache_append_device" + at, [this, layer] { return kvc_cache_append_device(cache(), layer, 1, s_.desc.dtype, view(layer, 0), view(layer, 1)); },
                       [this, layer] { write_inputs(s_.decode[0][layer], layer); }});
      calls.push_back({"kvc_attend_device" + at,
                       [this, layer] { return kvc_attend_device(cache(), layer, 1, s_.desc.dtype, view(layer, 2), view(layer, 3), kvc_buffer_view{}); },
                       nullptr, [this, layer] { keep(read_output(layer), {}); }});
    }
    calls.push_back({"one step (kvc_step_begin, every layer's device append and attend, kvc_step_end, kvc_step_wait)",
                     [this] { return one_step(); },
                     [this] {
                       for (uint32_t layer = 0; layer < s_.desc.num_layers; ++layer) write_inputs(s_.decode[1][layer], layer);
                     },
                     [this] {
                       for (uint32_t layer = 0; layer < s_.desc.num_layers; ++layer) keep(read_output(layer), {});
                     }});
    for (uint32_t layer = 0; layer < d.num_layers; ++layer)
      calls.push_back({"kvc_decode_device layer " + std::to_string(layer),
                       [this, layer] {
                         return kvc_decode_device(cache(), layer, s_.desc.dtype, view(layer, 0), view(layer, 1), view(layer, 2), view(layer, 3));
                       },
                       [this, layer] { write_inputs(s_.decode[1][layer], layer); }, [this, layer] { keep(read_output(layer), {}); }});
    add_batch_calls(calls);
    auto read = std::make_shared<LayerSnapshot>();
    calls.push_back({"kvc_cache_read", [this, read] {
                       read->slots = layer_slots(cache(), 1);
                       const size_t rows = size_t(read->slots) * s_.desc.num_kv_heads;
                       read->k.assign(rows * s_.desc.head_dim * 4, 0);
                       read->v.assign(rows * s_.desc.head_dim * 4, 0);
                       read->positions.assign(rows, -1);
                       return kvc_cache_read(cache(), 1, read->slots, s_.desc.dtype, read->k.data(), read->v.data(), read->positions.data());
                     },
                     nullptr, [this, read] {
                       keep(read->k, {});
                       keep(read->v, {});
                       outputs_.emplace_back(reinterpret_cast<const unsigned char*>(read->positions.data()),
                                             reinterpret_cast<const unsigned char*>(read->positions.data() + read->positions.size()));
                     }});
    calls.push_back({"kvc_cache_reset", [this] { return kvc_cache_reset(cache()); }});
    for (uint32_t layer = 0; layer < d.num_layers; ++layer) {
      const StepInputs& in = s_.decode[2][layer];
      const std::string at = " after the reset, layer " + std::to_string(layer);
      calls.push_back({"kvc_cache_append" + at, [this, layer, &in] { return kvc_cache_append(cache(), layer, 1, s_.desc.dtype, in.k.data(), in.v.data()); }});
      auto out = std::make_shared<std::vector<unsigned char>>(in.q.size());
      calls.push_back({"kvc_attend" + at, [this, layer, &in, out] { return kvc_attend(cache(), layer, 1, s_.desc.dtype, in.q.data(), out->data(), nullptr); },
                       nullptr, [this, out] { keep(*out, {}); }});
    }
    return calls;
  }

 private:
  kvc_buffer_view view(uint32_t layer, size_t place) const { return {buffer_.get(), layer * layer_bytes_ + places_[place]}; }

  // A second cache of the same shape and policy, given the prompt and its end in one step, so
  // that both caches are past their prompts (FAEDKV and FOURIER compressed: a batched append
  // folds their windows first); then a token appended to both by one
  // kvc_cache_append_batch_device (its batched kernel: two chunks make a group) and the token
  // of both attended by one kvc_attend_batch_device: its batched kernels where the policy takes
  // them, its per-cache route inside the call where it does not. (A cache's own device append
  // is faulted on the decode tokens before.)
  void add_batch_calls(std::vector<Call>& calls) {
    calls.push_back({"kvc_cache_create (the second cache)", [this] {
                       kvc_cache* cache = nullptr;
                       const kvc_status status = kvc_cache_create(context_, &s_.desc, &cache);
                       if (status == KVC_OK) second_.reset(cache);
                       CHECK((status == KVC_OK) == (cache != nullptr));
                       return status;
                     }});
    calls.push_back({"the second cache's prompt in one step (every chunk's host append and attend, kvc_cache_end_prefill)",
                     [this] { return second_prompt(); }});
    for (uint32_t layer = 0; layer < s_.desc.num_layers; ++layer) {
      const std::string at = " layer " + std::to_string(layer);
      const auto write = [this, layer] { write_inputs(s_.decode[3][layer], layer); };
      calls.push_back({"kvc_cache_append_batch_device (both caches)" + at,
                       [this, layer] {
                         kvc_cache* const caches[] = {cache(), second_.get()};
                         const kvc_buffer_view k[] = {view(layer, 0), view(layer, 0)}, v[] = {view(layer, 1), view(layer, 1)};
                         return kvc_cache_append_batch_device(context_, 2, caches, layer, 1, s_.desc.dtype, k, v);
                       },
                       write});
      calls.push_back({"kvc_attend_batch_device (both caches)" + at,
                       [this, layer] {
                         kvc_cache* const caches[] = {cache(), second_.get()};
                         const kvc_buffer_view q[] = {view(layer, 2), view(layer, 2)}, out[] = {view(layer, 3), view(layer, 5)};
                         return kvc_attend_batch_device(context_, 2, caches, layer, s_.desc.dtype, q, out, nullptr);
                       },
                       write,
                       [this, layer] {
                         keep(read_output(layer), {});
                         keep(read_output(layer, 5), {});
                       }});
    }
  }

  kvc_status second_prompt() {
    // Host outputs are written at the step's wait: one buffer, sized before any attend.
    for (const std::vector<StepInputs>& chunk : s_.prompt) prompt_out_.resize(std::max(prompt_out_.size(), chunk[0].q.size()));
    kvc_status status = kvc_step_begin(context_);
    if (status != KVC_OK) return status;
    for (size_t chunk = 0; chunk < s_.prompt.size() && status == KVC_OK; ++chunk)
      for (uint32_t layer = 0; layer < s_.desc.num_layers && status == KVC_OK; ++layer) {
        const uint32_t n = s_.policy.prompt_chunks[chunk];
        const StepInputs& in = s_.prompt[chunk][layer];
        status = kvc_cache_append(second_.get(), layer, n, s_.desc.dtype, in.k.data(), in.v.data());
        if (status == KVC_OK) status = kvc_attend(second_.get(), layer, n, s_.desc.dtype, in.q.data(), prompt_out_.data(), nullptr);
      }
    if (status == KVC_OK) status = kvc_cache_end_prefill(second_.get());
    const kvc_status end = kvc_step_end(context_);
    if (status != KVC_OK) return status;
    return end != KVC_OK ? end : kvc_step_wait(context_, UINT64_MAX);
  }

  void write_inputs(const StepInputs& in, uint32_t layer) {
    require_ok(context_, kvc_buffer_write(buffer_.get(), view(layer, 0).offset, in.k.size(), in.k.data()), "kvc_buffer_write k");
    require_ok(context_, kvc_buffer_write(buffer_.get(), view(layer, 1).offset, in.v.size(), in.v.data()), "kvc_buffer_write v");
    require_ok(context_, kvc_buffer_write(buffer_.get(), view(layer, 2).offset, in.q.size(), in.q.data()), "kvc_buffer_write q");
  }

  std::vector<unsigned char> read_output(uint32_t layer, size_t place = 3) {
    std::vector<unsigned char> out(s_.decode[0][layer].q.size());
    require_ok(context_, kvc_buffer_read(buffer_.get(), view(layer, place).offset, out.size(), out.data()), "kvc_buffer_read out");
    return out;
  }

  // A step's calls; the first failure ends the step (kvc_step_end then reports the broken step).
  kvc_status one_step() {
    kvc_status status = kvc_step_begin(context_);
    if (status != KVC_OK) return status;
    for (uint32_t layer = 0; layer < s_.desc.num_layers && status == KVC_OK; ++layer) {
      status = kvc_cache_append_device(cache(), layer, 1, s_.desc.dtype, view(layer, 0), view(layer, 1));
      if (status == KVC_OK) status = kvc_attend_device(cache(), layer, 1, s_.desc.dtype, view(layer, 2), view(layer, 3), kvc_buffer_view{});
    }
    const std::string first_error = kvc_context_last_error(context_);
    const kvc_status end = kvc_step_end(context_);
    if (status != KVC_OK) {
      CHECK(end == KVC_ERROR_BAD_STATE);  // the failed call broke the step: nothing submitted
      return status;
    }
    if (end != KVC_OK) return end;
    return kvc_step_wait(context_, UINT64_MAX);
  }

  void keep(const std::vector<unsigned char>& bytes, const std::vector<float>& scores) {
    outputs_.push_back(bytes);
    outputs_.emplace_back(reinterpret_cast<const unsigned char*>(scores.data()),
                          reinterpret_cast<const unsigned char*>(scores.data() + scores.size()));
  }

  kvc_context* context_;
  const Scenario& s_;
  CachePtr cache_, second_;
  std::vector<unsigned char> prompt_out_;  // the second cache's prompt outputs, not compared
  BufferPtr buffer_;
  std::vector<uint64_t> places_;
  uint64_t end_ = 0, layer_bytes_ = 0;
  std::vector<std::vector<unsigned char>> outputs_;
};

Scenario make_scenario(const PolicyCase& policy) {
  Scenario s{policy};
  s.policy.decode_tokens = 0;
  s.desc = s.policy.desc(KVC_DTYPE_F32);
  s.desc.num_q_heads = 4;  // tiny: lavapipe on two cores
  s.desc.head_dim = 16;
  for (uint32_t n : s.policy.prompt_chunks) {
    s.prompt.emplace_back();
    for (uint32_t layer = 0; layer < s.desc.num_layers; ++layer) s.prompt.back().push_back(random_step_inputs(s.desc, n));
  }
  for (int token = 0; token < 4; ++token) {
    s.decode.emplace_back();
    for (uint32_t layer = 0; layer < s.desc.num_layers; ++layer) s.decode.back().push_back(random_step_inputs(s.desc, 1));
  }
  return s;
}

// Runs every call unfaulted; returns, per call, the operations of each kind it reached.
std::vector<std::array<uint64_t, kOps>> run_all(Run& run) {
  std::vector<std::array<uint64_t, kOps>> counts;
  for (Run::Call& call : run.calls()) {
    INFO(call.name);
    if (call.setup) call.setup();
    faults::reset();
    const kvc_status status = call.run();
    counts.emplace_back();
    for (size_t op = 0; op < kOps; ++op) counts.back()[op] = faults::count(Op(op));
    require_ok(run.context(), status, call.name.c_str());
    if (call.record) call.record();
  }
  return counts;
}

// `call` with the n-th operation of `op` failing: an error with a message, the cache as before.
void expect_clean_failure(Run& run, Run::Call& call, Op op, uint64_t nth, VkResult error) {
  const std::string fault = call.name + ": " + faults::op_name(op) + " number " + std::to_string(nth) + " fails with " + kvc::vk::result_name(error);
  INFO(fault);
  const bool has_cache = run.cache() != nullptr;
  const RunState before = run.state();
  if (call.setup) call.setup();
  faults::reset();
  faults::arm(op, nth, error);
  const kvc_status status = call.run();
  const bool fired = faults::fired();
  faults::reset();
  REQUIRE(fired);
  const std::string message = kvc_context_last_error(run.context());
  INFO(outcome(run.context(), status));
  CHECK(status != KVC_OK);
  CHECK(status != KVC_ERROR_INTERNAL);
  CHECK(!message.empty());
  if (has_cache) CHECK(run.state() == before);
  else CHECK(run.cache() == nullptr);
}

struct Tally {
  std::array<uint64_t, kOps> injected{};
  uint64_t recovered = 0, lost = 0;
};

// Runs the scenario's calls before `index` on a fresh context: the state a cold fault starts from.
struct FreshRun {
  FreshRun(const Scenario& scenario, size_t index) : context(vulkan_context()), run(std::make_unique<Run>(context.get(), scenario)) {
    calls = run->calls();
    for (size_t before = 0; before < index; ++before) {
      if (calls[before].setup) calls[before].setup();
      require_ok(context.get(), calls[before].run(), calls[before].name.c_str());
    }
  }
  ContextPtr context;
  std::unique_ptr<Run> run;  // destroyed before the context: its cache and buffer first
  std::vector<Run::Call> calls;
};

void check_policy(const PolicyCase& policy, size_t policy_index, Tally& tally) {
  const Scenario scenario = make_scenario(policy);
  ContextPtr context = vulkan_context();
  // The reference (which also warms the context: pipelines, scratch, staging), then the count.
  Run reference(context.get(), scenario);
  run_all(reference);
  const RunState reference_end = reference.state();
  Run counted(context.get(), scenario);
  const std::vector<std::array<uint64_t, kOps>> counts = run_all(counted);
  CHECK(counted.outputs() == reference.outputs());

  // Every call of the faulted run fails at each operation it reaches first, then runs; its
  // first descriptor set then comes from a pool that is out of memory, which libkvc recovers
  // from with a new pool.
  Run faulted(context.get(), scenario);
  std::vector<Run::Call> calls = faulted.calls();
  for (size_t index = 0; index < calls.size(); ++index) {
    Run::Call& call = calls[index];
    for (Op op : kWarmOps)
      for (uint64_t nth = 1; nth <= counts[index][size_t(op)]; ++nth) {
        expect_clean_failure(faulted, call, op, nth, recoverable_error(op));
        ++tally.injected[size_t(op)];
      }
    INFO(call.name, " after its injected failures");
    if (call.setup) call.setup();
    faults::reset();
    faults::arm(Op::AllocateDescriptorSet, 1, VK_ERROR_OUT_OF_POOL_MEMORY);
    require_ok(faulted.context(), call.run(), call.name.c_str());
    tally.recovered += faults::fired();
    faults::reset();
    if (call.record) call.record();
  }
  CHECK(faulted.outputs() == reference.outputs());
  CHECK(faulted.state() == reference_end);

  // Pipelines and mapped staging: on a fresh context each call makes those it is the first to need.
  ContextPtr cold_context = vulkan_context();
  Run cold(cold_context.get(), scenario);
  const std::vector<std::array<uint64_t, kOps>> cold_counts = run_all(cold);
  for (size_t index = 0; index < cold_counts.size(); ++index)
    for (Op op : kColdOps)
      for (uint64_t nth = 1; nth <= cold_counts[index][size_t(op)]; ++nth) {
        FreshRun fresh(scenario, index);
        expect_clean_failure(*fresh.run, fresh.calls[index], op, nth, recoverable_error(op));
        ++tally.injected[size_t(op)];
        require_ok(fresh.context.get(), fresh.calls[index].run(), fresh.calls[index].name.c_str());
      }

  // A lost device: a submission fails with it in one call, a fence wait in another, each
  // policy at other calls, so that the policies together lose it in every kind of call.
  for (Op op : {Op::QueueSubmit, Op::WaitForFences}) {
    size_t index = (policy_index * 5 + (op == Op::QueueSubmit ? 0 : 2)) % counts.size();
    while (counts[index][size_t(op)] == 0) index = (index + 1) % counts.size();
    FreshRun fresh(scenario, index);
    kvc_context* context = fresh.context.get();
    Run::Call& call = fresh.calls[index];
    const std::string fault = call.name + ": " + faults::op_name(op) + " loses the device";
    INFO(fault);
    if (call.setup) call.setup();
    faults::reset();
    faults::arm(op, 1, VK_ERROR_DEVICE_LOST);
    const kvc_status status = call.run();
    REQUIRE(faults::fired());
    faults::reset();
    CHECK(status == KVC_ERROR_DEVICE_LOST);
    CHECK(std::string(kvc_context_last_error(context)).find("VK_ERROR_DEVICE_LOST") != std::string::npos);
    ++tally.lost;
    // From then on the context refuses work, with a message, and every handle still destroys.
    kvc_cache* another = nullptr;
    CHECK(kvc_cache_create(context, &scenario.desc, &another) == KVC_ERROR_DEVICE_LOST);
    CHECK(another == nullptr);
    CHECK(kvc_step_begin(context) == KVC_ERROR_DEVICE_LOST);
    kvc_buffer* buffer = nullptr;
    CHECK(kvc_buffer_create(context, 64, &buffer) == KVC_ERROR_DEVICE_LOST);
    if (kvc_cache* cache = fresh.run->cache()) {
      const StepInputs& in = scenario.decode[0][0];
      std::vector<unsigned char> out(in.q.size());
      CHECK(kvc_cache_append(cache, 0, 1, scenario.desc.dtype, in.k.data(), in.v.data()) == KVC_ERROR_DEVICE_LOST);
      CHECK(kvc_attend(cache, 0, 1, scenario.desc.dtype, in.q.data(), out.data(), nullptr) == KVC_ERROR_DEVICE_LOST);
      CHECK(kvc_cache_read(cache, 0, 0, scenario.desc.dtype, nullptr, nullptr, nullptr) == KVC_ERROR_DEVICE_LOST);
      CHECK(kvc_cache_reset(cache) == KVC_ERROR_DEVICE_LOST);
    }
    CHECK(std::string(kvc_context_last_error(context)).find("device was lost") != std::string::npos);
  }
}

Tally& total() {
  static Tally tally;
  return tally;
}

void check_named(const std::string& name) {
  const std::vector<PolicyCase> cases = policy_cases();
  size_t index = 0;
  while (index < cases.size() && cases[index].name != name) ++index;
  REQUIRE(index < cases.size());
  Tally tally;
  const auto start = std::chrono::steady_clock::now();
  check_policy(cases[index], index, tally);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[faults] %-10s", name.c_str());
  for (size_t op = 0; op < kOps; ++op) {
    if (Op(op) == Op::WaitForFences) continue;
    std::printf(" %s %llu,", faults::op_name(Op(op)), static_cast<unsigned long long>(tally.injected[op]));
    total().injected[op] += tally.injected[op];
  }
  std::printf(" out-of-pool recovered %llu, device lost %llu (%.1f s)\n", static_cast<unsigned long long>(tally.recovered),
              static_cast<unsigned long long>(tally.lost), seconds);
  std::fflush(stdout);
  total().recovered += tally.recovered;
  total().lost += tally.lost;
}

TEST_CASE("fault injection: FULL") { check_named("FULL"); }
TEST_CASE("fault injection: STREAMING") { check_named("STREAMING"); }
TEST_CASE("fault injection: H2O") { check_named("H2O"); }
TEST_CASE("fault injection: TOVA") { check_named("TOVA"); }
TEST_CASE("fault injection: TREEKV") { check_named("TREEKV"); }
TEST_CASE("fault injection: SNAPKV") { check_named("SNAPKV"); }
TEST_CASE("fault injection: PYRAMIDKV") { check_named("PYRAMIDKV"); }
TEST_CASE("fault injection: HITKV") { check_named("HITKV"); }
TEST_CASE("fault injection: PHITKV") { check_named("PHITKV"); }
TEST_CASE("fault injection: FREQKV") { check_named("FREQKV"); }
TEST_CASE("fault injection: FAEDKV") { check_named("FAEDKV"); }
TEST_CASE("fault injection: FOURIER") { check_named("FOURIER"); }

// The trig probe's submit is a context's first (vulkan/trig_precision.h): failed, it leaves the
// exact polynomial and a working context; a lost device fails the creation.
TEST_CASE("context creation: a failed trig probe leaves the exact route, a lost device fails the creation") {
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = KVC_BACKEND_VULKAN;
  faults::reset();
  faults::arm(Op::QueueSubmit, 1, VK_ERROR_OUT_OF_DEVICE_MEMORY);
  kvc_context* raw = nullptr;
  REQUIRE(kvc_context_create(&desc, &raw) == KVC_OK);
  ContextPtr context(raw);
  CHECK(faults::fired());
  CHECK_FALSE(context->backend->device().builtin_trig_precise());
  // The context works: a STREAMING cache (keys before RoPE) decodes, rotating keys the exact way.
  kvc_cache_desc cache_desc = small_cache_desc(KVC_DTYPE_F16, 64);
  cache_desc.policy = KVC_POLICY_STREAMING;
  CachePtr cache = make_cache(context.get(), cache_desc);
  REQUIRE(cache != nullptr);
  const StepInputs in = random_step_inputs(cache_desc, 3);
  REQUIRE(kvc_cache_append(cache.get(), 0, 3, cache_desc.dtype, in.k.data(), in.v.data()) == KVC_OK);
  std::vector<unsigned char> out(in.q.size() / 3);
  CHECK(kvc_attend(cache.get(), 0, 1, cache_desc.dtype, in.q.data() + 2 * out.size(), out.data(), nullptr) == KVC_OK);

  faults::reset();
  faults::arm(Op::QueueSubmit, 1, VK_ERROR_DEVICE_LOST);
  raw = nullptr;
  CHECK(kvc_context_create(&desc, &raw) == KVC_ERROR_DEVICE_LOST);
  CHECK(raw == nullptr);
  CHECK(faults::fired());
  faults::reset();
}

// A step's host outputs are written only by a wait that returns KVC_OK: after a wait that lost
// the device, the application may free them, and the context's destruction (which waits once
// more, and on lavapipe, where the loss was injected, finds the work done) must not write them.
TEST_CASE("a step whose wait loses the device writes none of its host outputs, then or later") {
  ContextPtr context = vulkan_context();
  const kvc_cache_desc desc = small_cache_desc(KVC_DTYPE_F32, 64);
  CachePtr cache = make_cache(context.get(), desc);
  const StepInputs in = random_step_inputs(desc, 1);
  auto out = std::make_unique<std::vector<unsigned char>>(in.q.size(), 0xff);
  REQUIRE(kvc_step_begin(context.get()) == KVC_OK);
  REQUIRE(kvc_cache_append(cache.get(), 0, 1, desc.dtype, in.k.data(), in.v.data()) == KVC_OK);
  REQUIRE(kvc_attend(cache.get(), 0, 1, desc.dtype, in.q.data(), out->data(), nullptr) == KVC_OK);
  REQUIRE(kvc_step_end(context.get()) == KVC_OK);
  faults::reset();
  faults::arm(Op::WaitForFences, 1, VK_ERROR_DEVICE_LOST);
  CHECK(kvc_step_wait(context.get(), UINT64_MAX) == KVC_ERROR_DEVICE_LOST);
  CHECK(faults::fired());
  faults::reset();
  CHECK(*out == std::vector<unsigned char>(in.q.size(), 0xff));
  out.reset();  // AddressSanitizer (CI's build of this suite) reports a write after this
  cache.reset();
  context.reset();
}

// make_parts: a layer's K, V and positions are parts of one device allocation (NVIDIA's driver
// takes about 0.6 ms for each), and so are FAEDKV's spectrum tables and states: three more
// layers are three more allocations at a cache's creation and six more at FAEDKV's
// kvc_cache_end_prefill (each layer's spectrum, and its sinks and window).
TEST_CASE("a cache's layer is one device allocation") {
  ContextPtr context = vulkan_context();
  auto allocations = [&](kvc_policy policy, uint32_t num_layers, bool end_prefill) {
    kvc_cache_desc desc = small_cache_desc(KVC_DTYPE_F16, 256);
    desc.num_layers = num_layers;
    desc.policy = policy;
    desc.rope_style = KVC_ROPE_NONE;  // FAEDKV takes keys rotated by the application
    faults::reset();
    CachePtr cache = make_cache(context.get(), desc);
    REQUIRE(cache != nullptr);
    if (!end_prefill) return faults::count(Op::AllocateMemory);
    const uint32_t prompt = 200;
    const StepInputs in = random_step_inputs(desc, prompt);
    for (uint32_t layer = 0; layer < num_layers; ++layer)
      REQUIRE(kvc_cache_append(cache.get(), layer, prompt, desc.dtype, in.k.data(), in.v.data()) == KVC_OK);
    faults::reset();
    REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
    return faults::count(Op::AllocateMemory);
  };
  // First the context's own first allocations (staging, scratch, FFT plans): not a layer's.
  for (bool end_prefill : {false, true}) allocations(KVC_POLICY_FAEDKV, 1, end_prefill);
  CHECK(allocations(KVC_POLICY_FULL, 5, false) - allocations(KVC_POLICY_FULL, 2, false) == 3);
  CHECK(allocations(KVC_POLICY_FAEDKV, 5, true) - allocations(KVC_POLICY_FAEDKV, 2, true) == 6);
}


}  // namespace

int main(int argc, char** argv) {
  // Each call's vkAllocateMemory calls are counted and then failed one by one: buffers kept for
  // reuse (vk::Reclaimer) would make the counts depend on what earlier calls gave back.
  setenv("KVC_BUFFER_REUSE", "0", 1);
  // A dispatch's descriptor set from a pool is the one step of recording that can fail (a pool
  // runs out and the next is made); pushed descriptors cannot. The suite takes the pool's route,
  // what a device without VK_KHR_push_descriptor gets, so that its failures are injected.
  setenv("KVC_PUSH_DESCRIPTORS", "0", 1);
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = KVC_BACKEND_VULKAN;
  kvc_context* probe = nullptr;
  if (kvc_context_create(&desc, &probe) != KVC_OK) {
    const char* require_gpu = std::getenv("KVC_REQUIRE_GPU");
    const bool required = require_gpu && std::strcmp(require_gpu, "0") != 0;
    std::printf("[kvc fault injection] SKIPPED: no Vulkan device%s\n", required ? ", but KVC_REQUIRE_GPU is set: failing" : "");
    return required ? 1 : 77;
  }
  kvc_context_destroy(probe);
  kvc::test::seed();
  doctest::Context context(argc, argv);
  const int result = context.run();
  uint64_t all = total().recovered + total().lost;
  for (uint64_t count : total().injected) all += count;
  std::printf("[faults] total: %llu faults injected\n", static_cast<unsigned long long>(all));
  return result;
}
