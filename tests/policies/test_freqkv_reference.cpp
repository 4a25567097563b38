// The FREQKV policy on the CPU backend through the C API: parameters refused with a message
// naming the field, and a stream of chunks and decode steps checked against the paper at
// every step (section 3.4): when the window fills, the slots after the sinks become FreqKV
// eq. 3 of what they held (by formula), the sinks stay bit-identical, every slot carries its
// index as position, the chunk must fit the room left, and a refused call changes nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "common/dtype.h"
#include "support/api_helpers.h"
#include "support/formulas.h"
#include "support/test_support.h"

namespace kvc {
namespace {

kvc_cache_desc freqkv_desc(kvc_dtype dtype, uint32_t window, const kvc_freqkv_params* params) {
  kvc_cache_desc desc = test::small_cache_desc(dtype, window);
  desc.policy = KVC_POLICY_FREQKV;
  desc.policy_params = params;
  return desc;
}

}  // namespace

TEST_CASE("FREQKV refuses bad parameters at cache creation, naming the field") {
  test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU);
  struct BadCase {
    uint32_t window, sink_tokens;
    float retain_ratio;
    uint32_t struct_size;
    const char* named;
  };
  const uint32_t size = sizeof(kvc_freqkv_params);
  const BadCase cases[] = {
      {64, 4, 0.0f, size, "retain_ratio"},   {64, 4, 1.0f, size, "retain_ratio"},
      {64, 4, -0.5f, size, "retain_ratio"},  {64, 4, 1.5f, size, "retain_ratio"},
      {64, 4, NAN, size, "retain_ratio"},    {64, 64, 0.5f, size, "sink_tokens"},
      {64, 100, 0.5f, size, "sink_tokens"},  {5, 4, 0.5f, size, "too few to compress"},
      {40, 4, 0.02f, size, "too few to compress"}, {20000, 4, 0.5f, size, "capacity"},
      {64, 4, 0.5f, 4, "struct_size"},
  };
  for (const BadCase& bad : cases) {
    const kvc_freqkv_params params{bad.struct_size, bad.sink_tokens, bad.retain_ratio};
    const kvc_cache_desc desc = freqkv_desc(KVC_DTYPE_F32, bad.window, &params);
    kvc_cache* cache = nullptr;
    INFO("window ", bad.window, " sinks ", bad.sink_tokens, " ratio ", bad.retain_ratio, " struct_size ", bad.struct_size);
    CHECK(kvc_cache_create(cpu.get(), &desc, &cache) == KVC_ERROR_INVALID_ARGUMENT);
    CHECK(cache == nullptr);
    CHECK(std::string(kvc_context_last_error(cpu.get())).find(bad.named) != std::string::npos);
  }
  const kvc_freqkv_params defaults = kvc_freqkv_params_default();
  CHECK(defaults.sink_tokens == 4);
  CHECK(defaults.retain_ratio == 0.5f);
}

TEST_CASE("FREQKV on the CPU follows section 3.4 step by step") {
  const uint32_t window = 40, sinks = 4, retained = 18;  // floor(0.5 * 36)
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
    const Dtype storage = static_cast<Dtype>(dtype);
    test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU);
    // NULL policy_params: the paper's 4 sinks and retaining ratio 0.5.
    const kvc_cache_desc desc = freqkv_desc(dtype, window, nullptr);
    test::CachePtr cache = test::make_cache(cpu.get(), desc);
    const uint32_t row = desc.num_kv_heads * desc.head_dim, dim = desc.head_dim;
    std::vector<test::LayerSnapshot> sinks_seen(desc.num_layers);
    uint64_t compressions = 0;
    // The first chunk fills the window; later chunks fill the room after each compression.
    const uint32_t steps[] = {40, 10, 1, 1, 3, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 9};
    for (uint32_t n : steps) {
      for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
        const test::StepInputs in = test::random_step_inputs(desc, n);
        const test::LayerSnapshot before_append = test::snapshot(cache.get(), layer);
        // One token more than the room is refused and changes nothing.
        const uint32_t room = window - before_append.slots;
        std::vector<unsigned char> too_many((room + 1) * row * dtype_size(storage));
        CHECK(kvc_cache_append(cache.get(), layer, room + 1, dtype, too_many.data(), too_many.data()) == KVC_ERROR_CAPACITY);
        CHECK(test::snapshot(cache.get(), layer) == before_append);

        REQUIRE(kvc_cache_append(cache.get(), layer, n, dtype, in.k.data(), in.v.data()) == KVC_OK);
        const test::LayerSnapshot full = test::snapshot(cache.get(), layer);
        std::vector<unsigned char> out(in.q.size());
        REQUIRE(kvc_attend(cache.get(), layer, n, dtype, in.q.data(), out.data(), nullptr) == KVC_OK);
        const test::LayerSnapshot after = test::snapshot(cache.get(), layer);
        INFO(dtype_name(storage), " layer ", layer, " chunk ", n, " held ", full.slots);
        for (uint32_t head = 0; head < desc.num_kv_heads; ++head)
          for (uint32_t slot = 0; slot < after.slots; ++slot) CHECK(after.positions[head * after.slots + slot] == int32_t(slot));
        if (full.slots < window) {
          CHECK(after == full);
          continue;
        }
        ++compressions;
        REQUIRE(after.slots == sinks + retained);
        const size_t element = dtype_size(storage);
        using Pair = std::pair<const std::vector<unsigned char>*, const std::vector<unsigned char>*>;
        for (const Pair& states : {Pair{&full.k, &after.k}, Pair{&full.v, &after.v}}) {
          const std::vector<float> held = test::decode(*states.first, storage), kept = test::decode(*states.second, storage);
          std::vector<float> got, expected;
          for (uint32_t head = 0; head < desc.num_kv_heads; ++head) {
            // Sinks: the same bytes as the tokens appended first.
            CHECK(std::memcmp(states.second->data() + size_t(head) * after.slots * dim * element,
                              states.first->data() + size_t(head) * window * dim * element, sinks * dim * element) == 0);
            for (uint32_t d = 0; d < dim; ++d) {
              std::vector<long double> signal(window - sinks);
              for (uint32_t s = sinks; s < window; ++s) signal[s - sinks] = held[(size_t(head) * window + s) * dim + d];
              const std::vector<long double> compressed = test::freqkv_compression_by_formula(signal, retained);
              for (uint32_t m = 0; m < retained; ++m) {
                expected.push_back(static_cast<float>(compressed[m]));
                got.push_back(kept[(size_t(head) * after.slots + sinks + m) * dim + d]);
              }
            }
          }
          // f32: the matrix and the result are rounded to f32, sums in double: ~1e-7 of the
          // scale. f16: the stored result is rounded to f16, 2^-11 relative.
          CHECK(test::relative_max_error(got, expected) < (dtype == KVC_DTYPE_F32 ? 2e-6 : 1e-3));
        }
        // The chunk was folded in: its queries cannot attend again.
        CHECK(kvc_attend(cache.get(), layer, 1, dtype, in.q.data(), out.data(), nullptr) == KVC_ERROR_BAD_STATE);
      }
    }
    kvc_cache_stats stats{sizeof(kvc_cache_stats)};
    REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
    CHECK(stats.compressions == compressions);
    CHECK(compressions == 3 * desc.num_layers);
  }
}

}  // namespace kvc
