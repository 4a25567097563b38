// The FULL cache through the C API: a Vulkan context and a CPU context fed the same stream
// of prefill chunks and decode tokens hold the same cache and give the same attention.
#include <doctest/doctest.h>

#include "common/dtype.h"
#include "support/api_helpers.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("FULL cache: Vulkan and CPU agree over prefill chunks and decode steps") {
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
    const Dtype storage = static_cast<Dtype>(dtype);
    test::ContextPtr gpu = test::make_context(KVC_BACKEND_VULKAN), cpu = test::make_context(KVC_BACKEND_CPU);
    REQUIRE(gpu);
    const kvc_cache_desc desc = test::small_cache_desc(dtype, 600);
    test::CachePtr gpu_cache = test::make_cache(gpu.get(), desc), cpu_cache = test::make_cache(cpu.get(), desc);
    const uint32_t steps[] = {37, 128, 1, 1, 200, 1, 1, 1};  // prefill chunks, then decode tokens
    for (uint32_t n : steps) {
      for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
        const test::StepInputs in = test::random_step_inputs(desc, n);
        std::vector<std::vector<unsigned char>> outs;
        std::vector<std::vector<float>> scores;
        for (kvc_cache* cache : {gpu_cache.get(), cpu_cache.get()}) {
          REQUIRE(kvc_cache_append(cache, layer, n, dtype, in.k.data(), in.v.data()) == KVC_OK);
          uint32_t slots = 0;
          REQUIRE(kvc_cache_layer_slots(cache, layer, &slots) == KVC_OK);
          outs.emplace_back(in.q.size());
          scores.emplace_back(desc.num_kv_heads * slots);
          REQUIRE(kvc_attend(cache, layer, n, dtype, in.q.data(), outs.back().data(), scores.back().data()) == KVC_OK);
        }
        INFO("chunk of ", n, " layer ", layer, " ", std::string(dtype_name(storage)));
        CHECK(test::relative_max_error(test::decode(outs[0], storage), test::decode(outs[1], storage)) <
              (dtype == KVC_DTYPE_F32 ? 1e-5 : 2e-3));
        CHECK(test::relative_max_error(scores[0], scores[1]) < test::cache_scores_tolerance(gpu.get(), desc, n));
      }
    }
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) CHECK(test::snapshot(gpu_cache.get(), layer) == test::snapshot(cpu_cache.get(), layer));
    kvc_cache_stats stats{sizeof(kvc_cache_stats)};
    REQUIRE(kvc_cache_stats_get(gpu_cache.get(), &stats) == KVC_OK);
    CHECK(stats.slots_held == 2 * 370);
    CHECK(stats.tokens_seen == 2 * 370);
    CHECK(stats.bytes_per_slot == desc.num_kv_heads * (2 * desc.head_dim * (dtype == KVC_DTYPE_F32 ? 4 : 2) + 4));
    CHECK(stats.device_bytes_held >= 2 * 600 * stats.bytes_per_slot);
    kvc_context_info info{sizeof(kvc_context_info)};
    REQUIRE(kvc_context_info_get(gpu.get(), &info) == KVC_OK);
    CHECK(info.backend == KVC_BACKEND_VULKAN);
    CHECK(info.validation_messages == 0);
  }
}

}  // namespace kvc
