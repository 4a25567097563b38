// The FULL cache through the C API: a Vulkan context and a CPU context fed the same stream
// of prefill chunks and decode tokens hold the same cache and give the same attention; with
// RoPE, keys stored rotated read back as they were appended.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

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
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer)
      test::check_same_layer(test::snapshot(gpu_cache.get(), layer), test::snapshot(cpu_cache.get(), layer), desc);
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

TEST_CASE("FULL with RoPE stores keys rotated and kvc_cache_read gives them back as appended") {
  for (kvc_backend backend : {KVC_BACKEND_CPU, KVC_BACKEND_VULKAN})
    for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
      for (kvc_rope_style style : {KVC_ROPE_NEOX, KVC_ROPE_INTERLEAVED}) {
        const Dtype storage = static_cast<Dtype>(dtype);
        test::ContextPtr context = test::make_context(backend);
        REQUIRE(context);
        kvc_cache_desc desc = test::small_cache_desc(dtype, 300);
        desc.rope_style = style;
        desc.rope_dims = 48;  // the last 16 dims are stored as they came
        REQUIRE(test::stores_rotated_keys(desc));
        test::CachePtr cache = test::make_cache(context.get(), desc);
        std::vector<float> appended;  // layer 1's keys, [token][kv head][dim]
        for (uint32_t n : {131u, 1u, 1u, 40u}) {
          for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
            const test::StepInputs in = test::random_step_inputs(desc, n);
            REQUIRE(kvc_cache_append(cache.get(), layer, n, dtype, in.k.data(), in.v.data()) == KVC_OK);
            if (layer == 1) {
              const std::vector<float> keys = test::decode(in.k, storage);
              appended.insert(appended.end(), keys.begin(), keys.end());
            }
          }
        }
        const test::LayerSnapshot shot = test::snapshot(cache.get(), 1);
        REQUIRE(shot.slots == 173);
        const uint32_t dim = desc.head_dim, heads = desc.num_kv_heads;
        const std::vector<float> read = test::decode(
            std::vector<unsigned char>(shot.k.begin(), shot.k.begin() + size_t(shot.slots) * heads * dim * dtype_size(storage)), storage);
        std::vector<float> expected(read.size());
        for (uint32_t head = 0; head < heads; ++head)
          for (uint32_t slot = 0; slot < shot.slots; ++slot) {
            CHECK(shot.positions[size_t(head) * shot.slots + slot] == int32_t(slot));
            for (uint32_t d = 0; d < dim; ++d)
              expected[(size_t(head) * shot.slots + slot) * dim + d] = appended[(size_t(slot) * heads + head) * dim + d];
          }
        const std::string label = std::string(backend == KVC_BACKEND_CPU ? "CPU " : "Vulkan ") + dtype_name(storage);
        INFO(label, " style ", style);
        // Rotated, rounded to the dtype, rotated back and rounded again: two roundings of
        // elements of the pair's magnitude (f16: 2^-11 each) and, on Vulkan, its f32 rotation.
        double worst = 0;
        for (size_t i = 0; i < read.size(); ++i) {
          const size_t row = i / dim, d = i % dim;
          if (d >= 48) {
            CHECK(read[i] == expected[i]);
            continue;
          }
          const size_t pair_first = style == KVC_ROPE_NEOX ? d % 24 : d / 2 * 2, pair_second = style == KVC_ROPE_NEOX ? pair_first + 24 : pair_first + 1;
          const double magnitude = std::hypot(expected[row * dim + pair_first], expected[row * dim + pair_second]);
          worst = std::max(worst, std::fabs(read[i] - expected[i]) / std::max(magnitude, 1e-3));
        }
        CHECK(worst < (dtype == KVC_DTYPE_F16 ? 0x1p-10 : 1e-6));
      }
}

TEST_CASE("FULL with RoPE refuses a key whose rotated pair would pass the dtype's range") {
  // A pair whose norm passes the largest value ((-2.9, 65504) in f16, (max, max) in f32) could
  // rotate to Inf; a pair of norm up to the largest value fits at every angle.
  for (kvc_backend backend : {KVC_BACKEND_CPU, KVC_BACKEND_VULKAN})
    for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
      const Dtype storage = static_cast<Dtype>(dtype);
      test::ContextPtr context = test::make_context(backend);
      REQUIRE(context);
      kvc_cache_desc desc = test::small_cache_desc(dtype, 16);
      desc.rope_style = KVC_ROPE_INTERLEAVED;
      test::CachePtr cache = test::make_cache(context.get(), desc);
      const size_t row = desc.head_dim, elements = size_t(desc.num_kv_heads) * row;
      const float largest = dtype == KVC_DTYPE_F16 ? 65504.0f : std::numeric_limits<float>::max();
      std::vector<float> k(elements, 0.5f), v(elements, 0.25f);
      k[row + 2] = dtype == KVC_DTYPE_F16 ? -2.9f : largest, k[row + 3] = largest;  // kv head 1, dims 2 and 3: one interleaved pair
      const std::vector<unsigned char> v_bytes = test::encode(v, storage);
      std::vector<float> too_large = k;
      const std::vector<unsigned char> too_large_bytes = test::encode(too_large, storage);
      const std::string label = std::string(backend == KVC_BACKEND_CPU ? "CPU " : "Vulkan ") + dtype_name(storage);
      INFO(label);
      test::expect_refused(context.get(), cache.get(), KVC_ERROR_INVALID_ARGUMENT,
                           [&] { return kvc_cache_append(cache.get(), 0, 1, dtype, too_large_bytes.data(), v_bytes.data()); },
                           "rotary pair (dims 2, 3)");
      k[row + 2] = 0.0f, k[row + 3] = largest;  // norm = the largest value: fits at every angle
      k[row + 4] = 0.6f * largest, k[row + 5] = 0.7f * largest;  // norm 0.92 of it
      const std::vector<unsigned char> fitting = test::encode(k, storage);
      REQUIRE(kvc_cache_append(cache.get(), 0, 1, dtype, fitting.data(), v_bytes.data()) == KVC_OK);
      const test::LayerSnapshot shot = test::snapshot(cache.get(), 0);
      const std::vector<float> read = test::decode(std::vector<unsigned char>(shot.k.begin(), shot.k.begin() + elements * dtype_size(storage)), storage);
      for (float value : read) CHECK(std::isfinite(value));
    }
}

}  // namespace kvc
