// FOURIER on Vulkan against the CPU: caches on both backends fed the same prompt, end of
// prefill and appends (single tokens, chunks that wrap the window's ring) give the same
// attention and read back the same cache at every step, with the same bookkeeping: compression
// at kvc_cache_end_prefill and, for a short prompt, after the attend that passes
// sinks + 2N + local_window; dims chosen by reconstruction error and from a caller's table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "common/dtype.h"
#include "support/api_helpers.h"
#include "support/test_support.h"

namespace kvc {
namespace {

struct StreamCase {
  const char* name;
  kvc_dtype dtype;
  std::vector<uint32_t> prompt, appends;
  bool caller_tables;
};

// K, V, Q for tokens first_token .. first_token + n - 1. Keys and values are smooth along the
// sequence plus noise, as a model's are and as sec. 3.4 picks dims for: each dim a wave of 0, 1
// or 2 cycles over the window (inside N = 3 states) with a phase of its own, plus 20% noise.
// Rows of pure noise project almost nothing onto 3 states, and appendix D's standardization
// then divides by that projection's spread (scale std(x) / std(F^T C)): the f32 rounding of
// the GPU's decode transforms, where the CPU works in double, came out amplified to 1.1e-5 on
// one seed in about 30 (7e-7 on these rows). Dim d is scaled by (1 + d / 16), so the dims' reconstruction errors are
// well apart and both backends rank them alike. Q stays in [-1, 1]: logits of order 10, whose
// f32 rounding stays well within the tolerances below.
test::StepInputs spread_inputs(const kvc_cache_desc& desc, uint32_t n, uint32_t first_token, uint32_t window) {
  const Dtype storage = static_cast<Dtype>(desc.dtype);
  test::StepInputs in;
  for (auto [bytes, heads, smooth] : {std::tuple{&in.k, desc.num_kv_heads, true}, {&in.v, desc.num_kv_heads, true},
                                      {&in.q, desc.num_q_heads, false}}) {
    std::vector<float> values = test::random_floats(size_t(n) * heads * desc.head_dim);
    if (smooth)
      for (size_t i = 0; i < values.size(); ++i) {
        const uint32_t dim = uint32_t(i % desc.head_dim), head = uint32_t(i / desc.head_dim % heads);
        const uint32_t token = first_token + uint32_t(i / (size_t(desc.head_dim) * heads));
        const double cycles = (head * 7 + dim * 3) % 3, phase = 2.0 * M_PI * ((head * 13 + dim * 5) % 17) / 17.0;
        const double wave = std::cos(2.0 * M_PI * cycles * token / window + phase);
        values[i] = float((0.8 * wave + 0.2 * values[i]) * (1.0 + dim / 16.0));
      }
    *bytes = test::encode(values, storage);
  }
  return in;
}

// Per kv head the same count of dims, a random set.
std::vector<uint8_t> random_table(const kvc_cache_desc& desc, uint32_t compressed) {
  std::vector<uint8_t> table;
  std::vector<uint8_t> row(desc.head_dim, 0);
  std::fill(row.begin(), row.begin() + compressed, 1);
  for (uint32_t i = 0; i < desc.num_layers * desc.num_kv_heads; ++i) {
    std::shuffle(row.begin(), row.end(), test::rng());
    table.insert(table.end(), row.begin(), row.end());
  }
  return table;
}

}  // namespace

TEST_CASE("FOURIER on Vulkan gives the CPU's attention and cache at every step") {
  test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU), gpu = test::make_context(KVC_BACKEND_VULKAN);
  REQUIRE(gpu != nullptr);
  const StreamCase cases[] = {
      {"compressed at the end of the prompt", KVC_DTYPE_F32, {9, 14}, {1, 1, 3, 1, 5, 1, 1}, false},
      {"compressed after a decode step", KVC_DTYPE_F16, {6, 4}, {1, 1, 1, 1, 1, 2, 1, 4, 1}, false},
      {"caller's tables", KVC_DTYPE_F16, {23}, {1, 4, 1, 1}, true},
  };
  for (const StreamCase& c : cases) {
    const Dtype storage = static_cast<Dtype>(c.dtype);
    kvc_fourier_params params = kvc_fourier_params_default();
    params.sinks = 2, params.local_window = 5, params.num_states = 3, params.window_length = 101;
    kvc_cache_desc desc = test::small_cache_desc(c.dtype, 64);
    desc.rope_style = KVC_ROPE_NONE;
    desc.policy = KVC_POLICY_FOURIER;
    desc.policy_params = &params;
    const std::vector<uint8_t> key_table = random_table(desc, 37), value_table = random_table(desc, 50);
    if (c.caller_tables) params.key_dims = key_table.data(), params.value_dims = value_table.data();
    test::CachePtr caches[2] = {test::make_cache(cpu.get(), desc), test::make_cache(gpu.get(), desc)};
    const uint32_t prompt_chunks = uint32_t(c.prompt.size());
    std::vector<uint32_t> chunks = c.prompt;
    chunks.insert(chunks.end(), c.appends.begin(), c.appends.end());
    uint32_t tokens_before = 0;
    for (size_t index = 0; index < chunks.size(); tokens_before += chunks[index++]) {
      const uint32_t n = chunks[index];
      const bool decoding = index >= prompt_chunks;
      for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
        const test::StepInputs in = spread_inputs(desc, n, tokens_before, params.window_length);
        // After the prompt one query attends: the newest token's.
        const uint32_t queries = decoding ? 1 : n;
        const size_t q_bytes = size_t(desc.num_q_heads) * desc.head_dim * dtype_size(storage);
        const unsigned char* q = in.q.data() + (n - queries) * q_bytes;
        std::vector<std::vector<unsigned char>> outs(2, std::vector<unsigned char>(queries * q_bytes, 0xff));
        for (int b = 0; b < 2; ++b) {
          REQUIRE(kvc_cache_append(caches[b].get(), layer, n, c.dtype, in.k.data(), in.v.data()) == KVC_OK);
          REQUIRE(kvc_attend(caches[b].get(), layer, queries, c.dtype, q, outs[b].data(), nullptr) == KVC_OK);
        }
        const test::LayerSnapshot read_cpu = test::snapshot(caches[0].get(), layer), read_gpu = test::snapshot(caches[1].get(), layer);
        INFO("seed ", test::seed(), " ", std::string(c.name), " chunk ", index, " (", n, " tokens) layer ", layer);
        // f32: the kernels sum in f32 where the CPU sums in double (1e-5 of the scale, as for the
        // ops). f16: both round outputs and read-backs to f16 (2^-11 relative each).
        const double tolerance = c.dtype == KVC_DTYPE_F32 ? 1e-5 : 2e-3;
        CHECK(test::relative_max_error(test::decode(outs[1], storage), test::decode(outs[0], storage)) < tolerance);
        REQUIRE(read_gpu.slots == read_cpu.slots);
        CHECK(read_gpu.positions == read_cpu.positions);
        CHECK(test::relative_max_error(test::decode(read_gpu.k, storage), test::decode(read_cpu.k, storage)) < tolerance);
        CHECK(test::relative_max_error(test::decode(read_gpu.v, storage), test::decode(read_cpu.v, storage)) < tolerance);
      }
      if (index + 1 == prompt_chunks)
        for (test::CachePtr& cache : caches) REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
      kvc_cache_stats stats[2] = {{sizeof(kvc_cache_stats)}, {sizeof(kvc_cache_stats)}};
      for (int b = 0; b < 2; ++b) REQUIRE(kvc_cache_stats_get(caches[b].get(), &stats[b]) == KVC_OK);
      CHECK(stats[1].slots_held == stats[0].slots_held);
      CHECK(stats[1].compressions == stats[0].compressions);
      CHECK(stats[1].device_bytes_held == stats[0].device_bytes_held);
    }
    kvc_cache_stats stats{sizeof(kvc_cache_stats)};
    REQUIRE(kvc_cache_stats_get(caches[1].get(), &stats) == KVC_OK);
    CHECK(stats.compressions == desc.num_layers);  // the stream made every layer compress
  }
  kvc_context_info info{sizeof(kvc_context_info)};
  REQUIRE(kvc_context_info_get(gpu.get(), &info) == KVC_OK);
  CHECK(info.validation_messages == 0);
}

}  // namespace kvc
