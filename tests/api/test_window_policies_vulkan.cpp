// The observation-window policies on Vulkan against the CPU backend through the C API: fed
// the same prompt (random, RoPE, f32 and f16), both keep exactly the same slots, bytes and
// positions, and the decode step after the prefill gives the same attention.
#include <doctest/doctest.h>

#include "support/api_helpers.h"
#include "support/prompt_feed.h"

namespace kvc {

TEST_CASE("observation-window policies: Vulkan keeps exactly the CPU's slots") {
  // Random keys with peaked queries (q in [-4, 4]): neighbouring scores differ by about 1%
  // of their size, far above the GPU's f32 rounding (1e-6), so no selection sits on a tie
  // that rounding could flip; exact ties (max pooling) are exact on both backends. The SIMT
  // kernels, then: on cooperative matrices the logits carry f16 rounding (~1e-3), enough to
  // move a logit across a row's rank-K bound and a hit count by one (the H100 once kept
  // another slot under P-HitKV f16); test_window_scores_vulkan bounds that path's hits.
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
    for (kvc_policy policy : {KVC_POLICY_SNAPKV, KVC_POLICY_PYRAMIDKV, KVC_POLICY_HITKV, KVC_POLICY_PHITKV}) {
      test::ContextPtr gpu = test::make_context(KVC_BACKEND_VULKAN, KVC_CONTEXT_NO_COOPERATIVE_MATRIX);
      test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU);
      REQUIRE(gpu);
      kvc_window_policy_params params = kvc_window_policy_params_default();
      params.budget = 40;
      params.window = 8;
      // P-HitKV takes a table that grows with depth: layers of one selection with different
      // budgets, one top-k run with a k for each.
      const uint32_t growing[] = {20, 60};
      if (policy == KVC_POLICY_PHITKV) params.layer_budgets = growing, params.num_layer_budgets = 2;
      kvc_cache_desc desc = test::small_cache_desc(dtype, 256);
      desc.policy = policy;
      desc.policy_params = &params;
      test::CachePtr gpu_cache = test::make_cache(gpu.get(), desc), cpu_cache = test::make_cache(cpu.get(), desc);
      const test::Prompt prompt = test::random_prompt(desc, 157, 4.0f);
      for (kvc_cache* cache : {gpu_cache.get(), cpu_cache.get()}) {
        test::feed(cache, desc, prompt, {64, 93});
        REQUIRE(kvc_cache_end_prefill(cache) == KVC_OK);
      }
      INFO("policy ", policy, " dtype ", dtype);
      for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
        const test::LayerSnapshot on_gpu = test::snapshot(gpu_cache.get(), layer);
        CHECK(on_gpu.slots < prompt.tokens);
        CHECK(on_gpu == test::snapshot(cpu_cache.get(), layer));
      }
      test::Prompt step = test::random_prompt(desc, 1, 2.0f);
      std::vector<std::vector<unsigned char>> outs;
      for (kvc_cache* cache : {gpu_cache.get(), cpu_cache.get()}) {
        const Dtype storage = static_cast<Dtype>(dtype);
        std::vector<float> k = step.k[0], v = step.v[0], q = step.q[0];
        const auto k_bytes = test::encode(k, storage), v_bytes = test::encode(v, storage), q_bytes = test::encode(q, storage);
        outs.emplace_back(q_bytes.size());
        REQUIRE(kvc_cache_append(cache, 0, 1, dtype, k_bytes.data(), v_bytes.data()) == KVC_OK);
        REQUIRE(kvc_attend(cache, 0, 1, dtype, q_bytes.data(), outs.back().data(), nullptr) == KVC_OK);
      }
      // As the FULL policy's test: f32 agrees to 1e-5 of the output scale, f16 to its rounding.
      const Dtype storage = static_cast<Dtype>(dtype);
      CHECK(test::relative_max_error(test::decode(outs[0], storage), test::decode(outs[1], storage)) < (dtype == KVC_DTYPE_F32 ? 1e-5 : 2e-3));
      kvc_context_info info{sizeof(kvc_context_info)};
      REQUIRE(kvc_context_info_get(gpu.get(), &info) == KVC_OK);
      CHECK(info.validation_messages == 0);
    }
}

}  // namespace kvc
