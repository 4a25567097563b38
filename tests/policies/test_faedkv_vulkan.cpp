// FAEDKV on Vulkan against the CPU through the C API: the same prompt chunks, end of prompt
// and decode steps (single tokens that lap the window's ring, and chunks), giving the same
// attention outputs and the same cache as kvc_cache_read rebuilds it, in f32 and f16.
#include <doctest/doctest.h>

#include "api/handles.h"
#include "support/api_helpers.h"
#include "support/test_support.h"
#include "vulkan/fft.h"

namespace kvc {

TEST_CASE("FAEDKV cache: Vulkan and CPU agree over the prompt and decode steps") {
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
    test::ContextPtr gpu = test::make_context(KVC_BACKEND_VULKAN), cpu = test::make_context(KVC_BACKEND_CPU);
    REQUIRE(gpu);
    kvc_cache_desc desc = test::small_cache_desc(dtype, 200);
    desc.rope_style = KVC_ROPE_NONE;  // FAEDKV takes keys as the model stores them
    kvc_faedkv_params params = kvc_faedkv_params_default();
    params.sinks = 4;
    params.recent_window = 9;
    params.chunks = 10;
    params.retain_ratio = 0.3f;
    const float importance[2][10] = {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {9, 0, 8, 1, 7, 2, 6, 3, 5, 4}};  // layers keep other chunks
    params.chunk_importance = &importance[0][0];
    desc.policy = KVC_POLICY_FAEDKV;
    desc.policy_params = &params;
    test::CachePtr gpu_cache = test::make_cache(gpu.get(), desc), cpu_cache = test::make_cache(cpu.get(), desc);
    // A prompt of 161 tokens (segment M = 148: chirp-z transforms over the span of each layer's
    // bins, 256 points for layer 0's chunks 7 to 9, 320 for layer 1's 0, 2 and 4), then decode.
    const uint32_t steps[] = {100, 61, 0, 1, 1, 4, 1, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1};
    for (uint32_t n : steps) {
      if (n == 0) {
        REQUIRE(kvc_cache_end_prefill(gpu_cache.get()) == KVC_OK);
        REQUIRE(kvc_cache_end_prefill(cpu_cache.get()) == KVC_OK);
        continue;
      }
      // f32: the segment's logits and value sum go through f32 DFTs of length M on the GPU and
      // a direct sum in double on the CPU (~1e-6 of the scale), the states through f32 folds
      // with f32 trig. f16: outputs and the rebuilt segment are rounded to f16 on both sides
      // and may land an ulp (2^-11) apart.
      for (uint32_t layer = 0; layer < desc.num_layers; ++layer)
        test::check_same_chunk(gpu_cache.get(), cpu_cache.get(), desc, layer, n,
                               dtype == KVC_DTYPE_F32 ? test::BackendTolerances{5e-5, 1e-5} : test::BackendTolerances{2e-3, 1.5e-3});
    }
    // Appends no attention follows: a token that left the window waits in the spare slot; the
    // next append (R tokens, the most one takes) folds it and R - 1 more, and leaves the R-th
    // waiting, which kvc_cache_read folds; then a decode step again.
    const test::BackendTolerances tolerances =
        dtype == KVC_DTYPE_F32 ? test::BackendTolerances{5e-5, 1e-5} : test::BackendTolerances{2e-3, 1.5e-3};
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
      const test::StepInputs token = test::random_step_inputs(desc, 1);
      for (kvc_cache* cache : {gpu_cache.get(), cpu_cache.get()})
        REQUIRE(kvc_cache_append(cache, layer, 1, desc.dtype, token.k.data(), token.v.data()) == KVC_OK);
      test::check_same_chunk(gpu_cache.get(), cpu_cache.get(), desc, layer, params.recent_window, tolerances, false);
      test::check_same_chunk(gpu_cache.get(), cpu_cache.get(), desc, layer, 1, tolerances);
    }
    kvc_cache_stats gpu_stats{sizeof(kvc_cache_stats)}, cpu_stats{sizeof(kvc_cache_stats)};
    REQUIRE(kvc_cache_stats_get(gpu_cache.get(), &gpu_stats) == KVC_OK);
    REQUIRE(kvc_cache_stats_get(cpu_cache.get(), &cpu_stats) == KVC_OK);
    CHECK(gpu_stats.slots_held == cpu_stats.slots_held);
    CHECK(gpu_stats.slots_held == desc.num_layers * (params.sinks + params.recent_window + 1));  // and the spare slot
    kvc_context_info info{sizeof(kvc_context_info)};
    REQUIRE(kvc_context_info_get(gpu.get(), &info) == KVC_OK);
    CHECK(info.validation_messages == 0);
  }
}

TEST_CASE("FAEDKV: a prompt of a new length whose padded length was seen plans no transform") {
  test::ContextPtr gpu = test::make_context(KVC_BACKEND_VULKAN);
  REQUIRE(gpu);
  kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, 200);
  desc.rope_style = KVC_ROPE_NONE;
  kvc_faedkv_params params = kvc_faedkv_params_default();
  params.sinks = 4;
  params.recent_window = 9;
  params.chunks = 10;
  desc.policy = KVC_POLICY_FAEDKV;
  desc.policy_params = &params;
  test::CachePtr cache = test::make_cache(gpu.get(), desc);
  const vk::FftPlans& plans = gpu->backend->fft_plans();
  // Prompts of 161 and 173 tokens: segments of 148 and 160, whose chunk 0 (bins 0 .. 13 and 0 ..
  // 15) and its mirrors span 27 and 31 bins, both padded to 192 points (3 * 64 >= 148 + 26 and
  // 160 + 30); each is transformed, then decodes one token (its spectral attention, its fold).
  uint64_t plans_after_first = 0;
  for (const uint32_t prompt : {161u, 173u}) {
    REQUIRE(kvc_cache_reset(cache.get()) == KVC_OK);
    const test::StepInputs inputs = test::random_step_inputs(desc, prompt), token = test::random_step_inputs(desc, 1);
    std::vector<unsigned char> out(token.q.size());
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer)
      REQUIRE(kvc_cache_append(cache.get(), layer, prompt, desc.dtype, inputs.k.data(), inputs.v.data()) == KVC_OK);
    REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
      REQUIRE(kvc_cache_append(cache.get(), layer, 1, desc.dtype, token.k.data(), token.v.data()) == KVC_OK);
      REQUIRE(kvc_attend(cache.get(), layer, 1, desc.dtype, token.q.data(), out.data(), nullptr) == KVC_OK);
    }
    if (prompt == 161) plans_after_first = plans.plans_made();
  }
  CHECK(plans.plans_made() == plans_after_first);
  // The span's plans, the prompt's (a sequence per pair of head dims) and the queries' (a pair
  // of query heads a sequence), not those of all bins (320 points, 5 * 64 >= 2 * 160 - 1).
  CHECK(plans.holds_plan({192, desc.head_dim / 2}));
  CHECK(plans.holds_plan({192, desc.num_q_heads / 2}));
  CHECK(vk::chirp_padded_length(160, 160) == 320);
  CHECK_FALSE(plans.holds_plan({320, desc.head_dim / 2}));
}

}  // namespace kvc
