// kvc_eviction_params through the C API on the CPU backend: every bad field refused with a
// message naming it, refused calls change nothing, per-layer sizes, chunks over a full
// cache, and reset.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "support/api_helpers.h"
#include "support/test_support.h"

namespace kvc {
namespace {

kvc_status create(kvc_context* context, kvc_policy policy, uint32_t capacity, const kvc_eviction_params* params,
                  kvc_cache** cache) {
  kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, capacity);
  desc.policy = policy;
  desc.policy_params = params;
  return kvc_cache_create(context, &desc, cache);
}

// Appends one random token to `layer` and attends it; returns kvc_attend's status.
kvc_status decode_step(kvc_cache* cache, uint32_t layer, uint32_t n = 1) {
  const kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, 1);
  const std::vector<float> k = test::random_floats(n * desc.num_kv_heads * desc.head_dim);
  const std::vector<float> q = test::random_floats(n * desc.num_q_heads * desc.head_dim);
  std::vector<float> out(q.size());
  const kvc_status appended = kvc_cache_append(cache, layer, n, KVC_DTYPE_F32, k.data(), k.data());
  if (appended != KVC_OK) return appended;
  return kvc_attend(cache, layer, n, KVC_DTYPE_F32, q.data(), out.data(), nullptr);
}

}  // namespace

TEST_CASE("eviction policies refuse bad sizes and fields with a message") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  struct Bad {
    kvc_policy policy;
    uint32_t capacity;
    void (*edit)(kvc_eviction_params&);
    const char* field;
  };
  static uint32_t bad_layers[2] = {64, 4};
  const Bad cases[] = {
      {KVC_POLICY_H2O, 16, [](kvc_eviction_params& p) { p.recent_window = 12; }, "capacity is 16"},       // 4 + 12 = c
      {KVC_POLICY_TREEKV, 20, [](kvc_eviction_params& p) { p.recent_window = 30; }, "recent_window (30)"},
      {KVC_POLICY_TOVA, 8, [](kvc_eviction_params& p) { p.sinks = 8, p.recent_window = 0; }, "sinks (8)"},
      {KVC_POLICY_STREAMING, 4, [](kvc_eviction_params&) {}, "capacity is 4"},                            // c <= 4 sinks
      {KVC_POLICY_H2O, 4, [](kvc_eviction_params&) {}, "capacity is 4"},  // default window 0, 4 sinks
      {KVC_POLICY_H2O, 64, [](kvc_eviction_params& p) { p.struct_size = 8; }, "struct_size"},
      {KVC_POLICY_H2O, 64, [](kvc_eviction_params& p) { p.chunk_slots = 0; }, "chunk_slots"},
      {KVC_POLICY_H2O, 64, [](kvc_eviction_params& p) { p.select_left_token = 1; }, "select_left_token"},
      {KVC_POLICY_TREEKV, 64, [](kvc_eviction_params& p) { p.select_left_token = 2; }, "select_left_token"},
      {KVC_POLICY_TREEKV, 64, [](kvc_eviction_params& p) { p.prefill_block = 0; }, "prefill_block"},
      {KVC_POLICY_TREEKV, 64, [](kvc_eviction_params& p) { p.layer_capacities = bad_layers; }, "layer_capacities[1] is 4"},
  };
  for (const Bad& bad : cases) {
    kvc_eviction_params params = kvc_eviction_params_default();
    bad.edit(params);
    kvc_cache* cache = reinterpret_cast<kvc_cache*>(0x1);
    INFO("expecting ", std::string(bad.field));
    CHECK(create(context.get(), bad.policy, bad.capacity, &params, &cache) == KVC_ERROR_INVALID_ARGUMENT);
    CHECK(cache == reinterpret_cast<kvc_cache*>(0x1));
    const std::string message = kvc_context_last_error(context.get());
    INFO(message);
    CHECK(message.find(bad.field) != std::string::npos);
  }
  for (kvc_policy policy : {KVC_POLICY_STREAMING, KVC_POLICY_H2O, KVC_POLICY_TOVA, KVC_POLICY_TREEKV}) {
    kvc_cache* cache = nullptr;
    CHECK(create(context.get(), policy, 1024, nullptr, &cache) == KVC_OK);
    kvc_cache_destroy(cache);
  }
}

TEST_CASE("eviction policies: per-layer sizes, refused calls, chunks over a full cache, reset") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  uint32_t sizes[2] = {10, 19};
  kvc_eviction_params params = kvc_eviction_params_default();
  params.sinks = 2;
  params.recent_window = 3;
  params.layer_capacities = sizes;
  params.chunk_slots = 30;
  kvc_cache* raw = nullptr;
  REQUIRE(create(context.get(), KVC_POLICY_H2O, 1, &params, &raw) == KVC_OK);
  test::CachePtr cache(raw);
  for (uint32_t token = 0; token < 25; ++token)
    for (uint32_t layer = 0; layer < 2; ++layer) REQUIRE(decode_step(cache.get(), layer) == KVC_OK);
  for (uint32_t layer = 0; layer < 2; ++layer) {
    const test::LayerSnapshot shot = test::snapshot(cache.get(), layer);
    CHECK(shot.slots == sizes[layer]);
    for (uint32_t h = 0; h < 2; ++h) {  // positions are the ranks 0..c-1 in some slot order
      std::vector<int32_t> ranks(shot.positions.begin() + h * shot.slots, shot.positions.begin() + (h + 1) * shot.slots);
      std::sort(ranks.begin(), ranks.end());
      for (uint32_t r = 0; r < shot.slots; ++r) CHECK(ranks[r] == int32_t(r));
    }
  }
  // Attending again after an eviction, or appending past c + chunk_slots: refused, nothing changes.
  const test::LayerSnapshot before = test::snapshot(cache.get(), 0);
  const kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, 1);
  std::vector<float> q(desc.num_q_heads * desc.head_dim), out(q.size());
  CHECK(kvc_attend(cache.get(), 0, 1, KVC_DTYPE_F32, q.data(), out.data(), nullptr) == KVC_ERROR_BAD_STATE);
  CHECK(decode_step(cache.get(), 0, 31) == KVC_ERROR_CAPACITY);
  CHECK(std::string(kvc_context_last_error(context.get())).find("chunk_slots") != std::string::npos);
  CHECK(test::snapshot(cache.get(), 0) == before);
  // A chunk of 30 over a full layer: attend evicts back to c, sinks and window kept.
  REQUIRE(decode_step(cache.get(), 0, 30) == KVC_OK);
  CHECK(test::snapshot(cache.get(), 0).slots == sizes[0]);
  kvc_cache_stats stats{sizeof(kvc_cache_stats)};
  REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
  CHECK(stats.compressions == (25 - 10) + (25 - 19) + 1);
  // After a reset the same inputs give the same cache: no step state survives.
  std::vector<test::LayerSnapshot> runs;
  for (int run = 0; run < 2; ++run) {
    REQUIRE(kvc_cache_reset(cache.get()) == KVC_OK);
    test::rng().seed(test::seed());
    for (uint32_t token = 0; token < 23; ++token) REQUIRE(decode_step(cache.get(), 1) == KVC_OK);
    runs.push_back(test::snapshot(cache.get(), 1));
  }
  CHECK(runs[0] == runs[1]);
}

}  // namespace kvc
