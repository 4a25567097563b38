// FREQKV on Vulkan against the CPU: the compression step after 1 and after 20 successive
// compressions (new tokens filling the window in between) for windows of 64, 1000 and 4096
// slots, 4092 + 4 sinks, and with recent tokens kept out of the transform (the authors' 8 + 8
// at 4096, a middle of 61 on the chirp-z route, recent tokens moving onto rows they overlap),
// with the sinks and the recent tokens bit-identical throughout; and whole caches fed the same
// chunks and decode steps through the C API, giving the same attention and contents.
#include <doctest/doctest.h>

#include <cstring>

#include "common/dtype.h"
#include "policies/freqkv.h"
#include "vulkan/device.h"
#include "vulkan/fft.h"
#include "vulkan/pipeline.h"
#include "support/api_helpers.h"
#include "support/test_support.h"

namespace kvc {
namespace {

// A policy with its device state on one backend, and one layer's K (or V) there.
struct CompressionRun {
  std::unique_ptr<FreqKvPolicy> policy;
  std::unique_ptr<Tensor> states;
};

}  // namespace

TEST_CASE("FreqKV compression on Vulkan equals the CPU over 20 successive compressions") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  struct Setting {
    uint32_t window, sinks, recent;
  };
  // Middles M = N - S - R: 64, 1000, 4096, 4092 (no recent tokens); 4080 and 69 on the FFT
  // route, 61 (prime) on the chirp-z one; 12 with 15 recent tokens, which land on rows 8 .. 22,
  // 9 .. 22 of them their own.
  const Setting settings[] = {{64, 0, 0}, {1000, 0, 0}, {4096, 0, 0}, {4096, 4, 0},
                              {4096, 8, 8}, {77, 3, 5}, {70, 3, 6}, {29, 2, 15}};
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (auto [window, sinks, recent] : settings) {
      CacheConfig config;
      config.num_layers = 1;
      config.num_kv_heads = window > 1000 ? 1 : 3;  // several heads where it is cheap
      config.num_q_heads = config.num_kv_heads;
      config.head_dim = 8;  // the sequence length is what is under test; 8 keeps lavapipe quick
      config.dtype = dtype;
      config.capacity = window;
      config.policy = KVC_POLICY_FREQKV;
      const kvc_freqkv_params params{sizeof(kvc_freqkv_params), sinks, 0.5f, recent};
      config.policy_params = &params;
      const uint32_t slot_stride = window + 3, dim = config.head_dim, heads = config.num_kv_heads;
      const size_t row_bytes = dim * dtype_size(dtype), bytes = size_t(heads) * slot_stride * row_bytes;
      std::vector<float> initial = test::random_floats(bytes / dtype_size(dtype));
      const std::vector<unsigned char> initial_bytes = test::encode(initial, dtype);

      std::vector<CompressionRun> runs;
      for (Backend* backend : {&test::cpu_backend(), gpu}) {
        CompressionRun run{std::make_unique<FreqKvPolicy>(config, freqkv_params(config)),
                           test::make_tensor(*backend, initial_bytes.data(), bytes)};
        run.policy->allocate_device_state(*backend);
        runs.push_back(std::move(run));
      }
      const uint32_t retained = runs[0].policy->retained_slots(), kept = sinks + retained + recent;
      CHECK(retained == (window - sinks - recent) / 2);
      const FreqKvPolicy& policy = *runs[0].policy;
      const ops::FrequencyCompressShape shape{heads, dim, policy.compressed_slots(), retained, slot_stride, dtype};
      const ops::FrequencyCompressRoute route = ops::frequency_compress_route(*gpu, shape);
      size_t pipelines_after_first = 0;
      for (uint32_t compression = 1; compression <= 20; ++compression) {
        INFO(std::string(dtype_name(dtype)), " window ", window, " sinks ", sinks, " recent ", recent, " route ", int(route), " after ",
             compression, " compressions");
        std::vector<float> incoming = test::random_floats(size_t(window - kept) * dim);
        const std::vector<unsigned char> incoming_bytes = test::encode(incoming, dtype);
        std::vector<std::vector<unsigned char>> held;
        for (CompressionRun& run : runs) {
          Backend& backend = run.states->backend();
          const std::vector<unsigned char> full = test::read_tensor(backend, *run.states, bytes);
          backend.begin();
          run.policy->compress(*run.states, slot_stride);
          backend.submit();
          held.push_back(test::read_tensor(backend, *run.states, bytes));
          // The window's last R rows, bit for bit, right after the compressed slots.
          for (uint32_t head = 0; head < heads; ++head)
            CHECK(std::memcmp(held.back().data() + (size_t(head) * slot_stride + sinks + retained) * row_bytes,
                              full.data() + (size_t(head) * slot_stride + window - recent) * row_bytes, recent * row_bytes) == 0);
          backend.begin();  // new tokens fill the window again
          for (uint32_t head = 0; head < heads; ++head)
            backend.upload(incoming_bytes.data(), incoming_bytes.size(), *run.states, (size_t(head) * slot_stride + kept) * row_bytes);
          backend.submit();
        }
        std::vector<std::vector<float>> compressed(2);
        for (size_t b = 0; b < 2; ++b)
          for (uint32_t head = 0; head < heads; ++head) {
            const unsigned char* first = held[b].data() + size_t(head) * slot_stride * row_bytes;
            CHECK(std::memcmp(first, initial_bytes.data() + size_t(head) * slot_stride * row_bytes, sinks * row_bytes) == 0);
            const std::vector<float> rows = test::decode(std::vector<unsigned char>(first + sinks * row_bytes, first + kept * row_bytes), dtype);
            compressed[b].insert(compressed[b].end(), rows.begin(), rows.end());
          }
        // Nothing is built after the first compression: no pipeline (tables are built by
        // allocate_device_state, and frequency_compress refuses to build one while recording).
        if (compression == 1) pipelines_after_first = gpu->device().pipelines().size();
        CHECK(gpu->device().pipelines().size() == pipelines_after_first);
        if (compression != 1 && compression != 20) continue;
        // f32: each step sums M terms in f32 on the GPU and in double on the CPU, about
        // sqrt(N) * 6e-8 of the scale (4e-6 seen at N = 4096), and the map contracts (its
        // rescale is sqrt(gamma) < 1), so 20 steps do not grow it. f16: each step's result is
        // rounded to f16 on both sides and may land one ulp (2^-11 of the scale) apart; later
        // steps carry such flips without growing them: allow three.
        CHECK(test::relative_max_error(compressed[1], compressed[0]) < (dtype == Dtype::F32 ? 1e-5 : 1.5e-3));
      }
    }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("FREQKV cache: Vulkan and CPU agree over chunks and decode steps across compressions") {
  struct Setting {
    uint32_t window;
    const kvc_freqkv_params* params;
    uint32_t kept;  // S + L + R
  };
  const kvc_freqkv_params with_recent{sizeof(kvc_freqkv_params), 4, 0.5f, 7};
  // NULL: N = 100, S = 4 keeps 4 + 48; N = 101 with 7 recent tokens keeps 4 + 45 + 7.
  const Setting settings[] = {{100, nullptr, 52}, {101, &with_recent, 56}};
  for (const Setting& setting : settings)
    for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
      INFO("window ", setting.window, " recent tokens ", setting.params ? setting.params->recent_tokens : 0);
      test::ContextPtr gpu = test::make_context(KVC_BACKEND_VULKAN), cpu = test::make_context(KVC_BACKEND_CPU);
      REQUIRE(gpu);
      kvc_cache_desc desc = test::small_cache_desc(dtype, setting.window);
      desc.policy = KVC_POLICY_FREQKV;
      desc.policy_params = setting.params;
      test::CachePtr gpu_cache = test::make_cache(gpu.get(), desc), cpu_cache = test::make_cache(cpu.get(), desc);
      // Fill (compress), two chunks that refill (compress), decode, a chunk that refills, decode.
      const uint32_t room = setting.window - setting.kept;
      const uint32_t steps[] = {setting.window, room - room / 3, room / 3, 1, 1, 1, 1, 1, room - 5, 1, 1};
      for (uint32_t n : steps) {
        // As for the FULL cache (attention's own rounding; f16 outputs are rounded on both
        // sides), over compressed K/V that differ by the compression's rounding (test above).
        for (uint32_t layer = 0; layer < desc.num_layers; ++layer)
          test::check_same_chunk(gpu_cache.get(), cpu_cache.get(), desc, layer, n,
                                 dtype == KVC_DTYPE_F32 ? test::BackendTolerances{1e-5, 1e-5} : test::BackendTolerances{2e-3, 1.5e-3});
      }
      kvc_cache_stats stats{sizeof(kvc_cache_stats)};
      REQUIRE(kvc_cache_stats_get(gpu_cache.get(), &stats) == KVC_OK);
      CHECK(stats.compressions == 3 * desc.num_layers);
      CHECK(stats.slots_held == desc.num_layers * (setting.kept + 2));
      kvc_context_info info{sizeof(kvc_context_info)};
      REQUIRE(kvc_context_info_get(gpu.get(), &info) == KVC_OK);
      CHECK(info.validation_messages == 0);
    }
}

}  // namespace kvc
