// SnapKV, PyramidKV, HitKV and P-HitKV through the C API on the CPU backend: budgets exact
// per layer and kv head, the window always kept, decoding after the prefill, HitKV keeping
// the paper's motivating token that SnapKV drops, and bad parameters refused with a message.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "policies/pyramid_budgets.h"
#include "support/api_helpers.h"
#include "support/prompt_feed.h"

namespace kvc {
namespace {

kvc_cache_desc window_desc(kvc_policy policy, const kvc_window_policy_params* params, uint32_t capacity) {
  kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, capacity);
  desc.policy = policy;
  desc.policy_params = params;
  return desc;
}

// Creates a cache that must fail; returns the status and checks the message names `field`.
kvc_status refused(kvc_context* context, const kvc_cache_desc& desc, const char* field) {
  kvc_cache* cache = nullptr;
  const kvc_status status = kvc_cache_create(context, &desc, &cache);
  INFO("field ", field, ": ", kvc_context_last_error(context));
  CHECK(cache == nullptr);
  CHECK(std::string(kvc_context_last_error(context)).find(field) != std::string::npos);
  return status;
}

}  // namespace

TEST_CASE("observation-window policies keep exactly the budget per layer and head, window included") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  const uint32_t prompt_tokens = 300, window = 8;
  const std::vector<uint32_t> table = {70, 33};
  for (kvc_policy policy : {KVC_POLICY_SNAPKV, KVC_POLICY_PYRAMIDKV, KVC_POLICY_HITKV, KVC_POLICY_PHITKV})
    for (bool with_table : {false, true}) {
      const bool pyramid = policy == KVC_POLICY_PYRAMIDKV || policy == KVC_POLICY_PHITKV;
      if (with_table && !pyramid) continue;
      kvc_window_policy_params params = kvc_window_policy_params_default();
      params.budget = 48;
      params.window = window;
      if (with_table) params.layer_budgets = table.data(), params.num_layer_budgets = 2;
      const kvc_cache_desc desc = window_desc(policy, &params, 400);
      test::CachePtr cache = test::make_cache(context.get(), desc);
      const test::Prompt prompt = test::random_prompt(desc, prompt_tokens, 3.0f);
      test::feed(cache.get(), desc, prompt, {100, 37, 163});
      REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
      const std::vector<uint32_t> expected =
          with_table ? table : pyramid ? pyramid_budgets(48, window, 2, 20.0, prompt_tokens - window) : std::vector<uint32_t>{48, 48};
      INFO("policy ", policy, " table ", with_table);
      CHECK(std::accumulate(expected.begin(), expected.end(), 0u) == (with_table ? 103u : 96u));
      for (uint32_t layer = 0; layer < 2; ++layer) {
        const test::LayerSnapshot shot = test::snapshot(cache.get(), layer);
        REQUIRE(shot.slots == expected[layer]);
        for (uint32_t head = 0; head < desc.num_kv_heads; ++head) {
          const std::vector<int32_t> kept(shot.positions.begin() + head * shot.slots, shot.positions.begin() + (head + 1) * shot.slots);
          CHECK(std::is_sorted(kept.begin(), kept.end()));
          CHECK(std::adjacent_find(kept.begin(), kept.end()) == kept.end());
          for (uint32_t i = 0; i < window; ++i) CHECK(kept[shot.slots - window + i] == int32_t(prompt_tokens - window + i));
        }
        // Decoding appends after the kept slots, at the next original position.
        std::vector<float> one_k = test::random_floats(desc.num_kv_heads * desc.head_dim), one_q = test::random_floats(desc.num_q_heads * desc.head_dim);
        std::vector<float> out(one_q.size());
        REQUIRE(kvc_cache_append(cache.get(), layer, 1, KVC_DTYPE_F32, one_k.data(), one_k.data()) == KVC_OK);
        REQUIRE(kvc_attend(cache.get(), layer, 1, KVC_DTYPE_F32, one_q.data(), out.data(), nullptr) == KVC_OK);
        const test::LayerSnapshot after = test::snapshot(cache.get(), layer);
        CHECK(after.slots == expected[layer] + 1);
        CHECK(after.positions[after.slots - 1] == int32_t(prompt_tokens));
      }
    }
}

TEST_CASE("HitKV keeps a token in every window query's top K whose summed attention is low; SnapKV drops it") {
  // HitKV's motivating case (Sec. "Introduction", Fig. 2): no RoPE, one kv head, one query
  // head, head_dim 8 (so q.k / sqrt(8) with q = sqrt(8) e_j reads k's component j). Window
  // query j gives logit 6 to its own spike token, 2 to the steady token, 0 to the rest: each
  // spike takes ~0.9 of one query, the steady token ~0.016 of every query.
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  const uint32_t window = 4, prompt_tokens = 44, steady = 15;
  const uint32_t spikes[window] = {10, 22, 28, 36};  // all more than 3 (the pooling radius) from `steady`
  kvc_window_policy_params params = kvc_window_policy_params_default();
  params.window = window;
  params.budget = window + 2;  // two prefix tokens kept
  std::vector<int32_t> kept[2];
  for (kvc_policy policy : {KVC_POLICY_SNAPKV, KVC_POLICY_HITKV}) {
    kvc_cache_desc desc = kvc_cache_desc_default();
    desc.num_layers = 1, desc.num_q_heads = 1, desc.num_kv_heads = 1, desc.head_dim = 8, desc.capacity = 64;
    desc.policy = policy, desc.policy_params = &params;
    test::CachePtr cache = test::make_cache(context.get(), desc);
    test::Prompt prompt;
    prompt.tokens = prompt_tokens;
    prompt.k.assign(1, std::vector<float>(prompt_tokens * 8, 0.0f));
    prompt.v.assign(1, test::random_floats(prompt_tokens * 8));
    prompt.q.assign(1, test::random_floats(prompt_tokens * 8));
    for (uint32_t j = 0; j < window; ++j) {
      prompt.k[0][spikes[j] * 8 + j] = 6.0f;
      prompt.k[0][steady * 8 + j] = 2.0f;
      float* query = &prompt.q[0][(prompt_tokens - window + j) * 8];
      std::fill(query, query + 8, 0.0f);
      query[j] = std::sqrt(8.0f);
    }
    test::feed(cache.get(), desc, prompt, {prompt_tokens});
    REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
    const test::LayerSnapshot shot = test::snapshot(cache.get(), 0);
    REQUIRE(shot.slots == window + 2);
    kept[policy == KVC_POLICY_HITKV].assign(shot.positions.begin(), shot.positions.begin() + 2);
  }
  INFO("SnapKV kept ", kept[0][0], ", ", kept[0][1], "; HitKV kept ", kept[1][0], ", ", kept[1][1]);
  CHECK(std::count(kept[1].begin(), kept[1].end(), int32_t(steady)) == 1);
  CHECK(std::count(kept[0].begin(), kept[0].end(), int32_t(steady)) == 0);
}

TEST_CASE("HitKV with theta 0 keeps what SnapKV without pooling keeps: both rank by cumulative attention") {
  // theta = 0 gives every key the hit flag, so only the padding rule (window-cumulative
  // attention) ranks; SnapKV with a pooling kernel of 1 ranks by the same sum.
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  kvc_window_policy_params params = kvc_window_policy_params_default();
  params.budget = 30;
  params.window = 6;
  params.pool_kernel = 1;
  params.hit_threshold = 0.0f;
  std::vector<test::LayerSnapshot> kept;
  const kvc_cache_desc snap = window_desc(KVC_POLICY_SNAPKV, &params, 200);
  const test::Prompt prompt = test::random_prompt(snap, 120, 3.0f);
  for (kvc_policy policy : {KVC_POLICY_SNAPKV, KVC_POLICY_HITKV}) {
    const kvc_cache_desc desc = window_desc(policy, &params, 200);
    test::CachePtr cache = test::make_cache(context.get(), desc);
    test::feed(cache.get(), desc, prompt, {50, 70});
    REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
    kept.push_back(test::snapshot(cache.get(), 1));
  }
  CHECK(kept[0].slots == 30);
  CHECK(kept[0] == kept[1]);
}

TEST_CASE("observation-window policies refuse bad parameters with a message naming the field") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  const uint32_t wrong_size[] = {64, 64, 64}, too_large[] = {64, 500};
  struct Bad { kvc_policy policy; const char* field; void (*edit)(kvc_window_policy_params&, const uint32_t*, const uint32_t*); };
  const Bad cases[] = {
      {KVC_POLICY_SNAPKV, "budget", [](kvc_window_policy_params& p, const uint32_t*, const uint32_t*) { p.budget = 0; }},
      {KVC_POLICY_HITKV, "budget", [](kvc_window_policy_params& p, const uint32_t*, const uint32_t*) { p.budget = 401; }},
      {KVC_POLICY_SNAPKV, "budget", [](kvc_window_policy_params& p, const uint32_t*, const uint32_t*) { p.budget = p.window; }},
      {KVC_POLICY_SNAPKV, "window", [](kvc_window_policy_params& p, const uint32_t*, const uint32_t*) { p.window = 0; }},
      {KVC_POLICY_SNAPKV, "pool_kernel", [](kvc_window_policy_params& p, const uint32_t*, const uint32_t*) { p.pool_kernel = 6; }},
      {KVC_POLICY_HITKV, "hit_threshold", [](kvc_window_policy_params& p, const uint32_t*, const uint32_t*) { p.hit_threshold = 1.5f; }},
      {KVC_POLICY_HITKV, "hit_k", [](kvc_window_policy_params& p, const uint32_t*, const uint32_t*) { p.hit_k = 401; }},
      {KVC_POLICY_PYRAMIDKV, "pyramid_beta", [](kvc_window_policy_params& p, const uint32_t*, const uint32_t*) { p.pyramid_beta = 0.5f; }},
      {KVC_POLICY_PYRAMIDKV, "num_layer_budgets",
       [](kvc_window_policy_params& p, const uint32_t* size3, const uint32_t*) { p.layer_budgets = size3, p.num_layer_budgets = 3; }},
      {KVC_POLICY_PHITKV, "layer_budgets[1]",
       [](kvc_window_policy_params& p, const uint32_t*, const uint32_t* large) { p.layer_budgets = large, p.num_layer_budgets = 2; }},
      {KVC_POLICY_SNAPKV, "layer_budgets",
       [](kvc_window_policy_params& p, const uint32_t*, const uint32_t* large) { p.layer_budgets = large, p.num_layer_budgets = 2; }},
  };
  for (const Bad& bad : cases) {
    kvc_window_policy_params params = kvc_window_policy_params_default();
    params.budget = 64;
    bad.edit(params, wrong_size, too_large);
    CHECK(refused(context.get(), window_desc(bad.policy, &params, 400), bad.field) == KVC_ERROR_INVALID_ARGUMENT);
  }
}

TEST_CASE("kvc_cache_end_prefill without the window's queries fails and changes nothing") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  kvc_window_policy_params params = kvc_window_policy_params_default();
  params.budget = 40;
  params.window = 8;
  const kvc_cache_desc desc = window_desc(KVC_POLICY_HITKV, &params, 200);
  test::CachePtr cache = test::make_cache(context.get(), desc);
  const test::Prompt prompt = test::random_prompt(desc, 100, 2.0f);
  test::feed(cache.get(), desc, prompt, {100});
  std::vector<float> extra = test::random_floats(desc.num_kv_heads * desc.head_dim * 3);
  REQUIRE(kvc_cache_append(cache.get(), 1, 3, KVC_DTYPE_F32, extra.data(), extra.data()) == KVC_OK);  // never attended
  const test::LayerSnapshot before = test::snapshot(cache.get(), 0);
  CHECK(kvc_cache_end_prefill(cache.get()) == KVC_ERROR_BAD_STATE);
  CHECK(std::string(kvc_context_last_error(context.get())).find("layer 1") != std::string::npos);
  CHECK(test::snapshot(cache.get(), 0) == before);
  CHECK(kvc_cache_end_prefill(nullptr) == KVC_ERROR_NULL_POINTER);
}

}  // namespace kvc
