// The FREQKV policy on the CPU backend through the C API: parameters refused with a message
// naming the field, an older struct without recent_tokens, and streams of chunks and decode
// steps checked against the paper at every step (section 3.4), with and without the authors'
// recent tokens: when the window fills, the slots between the sinks and the recent tokens
// become FreqKV eq. 3 of what they held (by formula), the sinks and the recent tokens stay
// bit-identical (the latter right after the compressed slots), every slot carries its index as
// position, the chunk must fit the room left, and a refused call changes nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

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
    uint32_t window, sink_tokens, recent_tokens;
    float retain_ratio;
    uint32_t struct_size;
    const char* named;
  };
  const uint32_t size = sizeof(kvc_freqkv_params), first_version = offsetof(kvc_freqkv_params, recent_tokens);
  const BadCase cases[] = {
      {64, 4, 0, 0.0f, size, "retain_ratio"},   {64, 4, 0, 1.0f, size, "retain_ratio"},
      {64, 4, 0, -0.5f, size, "retain_ratio"},  {64, 4, 0, 1.5f, size, "retain_ratio"},
      {64, 4, 0, NAN, size, "retain_ratio"},    {64, 64, 0, 0.5f, size, "sink_tokens"},
      {64, 100, 0, 0.5f, size, "sink_tokens"},  {5, 4, 0, 0.5f, size, "too few to compress"},
      {40, 4, 0, 0.02f, size, "too few to compress"}, {20000, 4, 0, 0.5f, size, "capacity"},
      {64, 4, 60, 0.5f, size, "recent_tokens"}, {64, 0, 64, 0.5f, size, "recent_tokens"},
      {64, 4, UINT32_MAX, 0.5f, size, "recent_tokens"},  // sinks + recent past 2^32
      {20, 4, 14, 0.4f, size, "too few to compress"},    // floor(0.4 * 2) = 0
      {64, 4, 0, 0.5f, 4, "struct_size"},       {64, 4, 0, 0.5f, first_version - 1, "struct_size"},
      {64, 4, 0, 0.5f, first_version + 1, "struct_size"},  // part of recent_tokens
      {64, 4, 0, 0.5f, size - 1, "struct_size"},
  };
  for (const BadCase& bad : cases) {
    const kvc_freqkv_params params{bad.struct_size, bad.sink_tokens, bad.retain_ratio, bad.recent_tokens};
    const kvc_cache_desc desc = freqkv_desc(KVC_DTYPE_F32, bad.window, &params);
    kvc_cache* cache = nullptr;
    INFO("window ", bad.window, " sinks ", bad.sink_tokens, " recent ", bad.recent_tokens, " ratio ", bad.retain_ratio,
         " struct_size ", bad.struct_size);
    CHECK(kvc_cache_create(cpu.get(), &desc, &cache) == KVC_ERROR_INVALID_ARGUMENT);
    CHECK(cache == nullptr);
    CHECK(std::string(kvc_context_last_error(cpu.get())).find(bad.named) != std::string::npos);
  }
  const kvc_freqkv_params defaults = kvc_freqkv_params_default();
  CHECK(defaults.struct_size == sizeof(kvc_freqkv_params));
  CHECK(defaults.sink_tokens == 4);
  CHECK(defaults.retain_ratio == 0.5f);
  CHECK(defaults.recent_tokens == 0);
}

TEST_CASE("FREQKV reads a struct that ends before recent_tokens as recent_tokens = 0") {
  test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU);
  // What lies past the older struct is not the caller's: 60 recent tokens would be refused.
  kvc_freqkv_params params{offsetof(kvc_freqkv_params, recent_tokens), 4, 0.5f, 60};
  const kvc_cache_desc desc = freqkv_desc(KVC_DTYPE_F32, 64, &params);
  test::CachePtr cache = test::make_cache(cpu.get(), desc);
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
    const test::StepInputs in = test::random_step_inputs(desc, 64);
    REQUIRE(kvc_cache_append(cache.get(), layer, 64, KVC_DTYPE_F32, in.k.data(), in.v.data()) == KVC_OK);
    std::vector<unsigned char> out(in.q.size());
    REQUIRE(kvc_attend(cache.get(), layer, 64, KVC_DTYPE_F32, in.q.data(), out.data(), nullptr) == KVC_OK);
    CHECK(test::snapshot(cache.get(), layer).slots == 4 + 30);  // S + floor(0.5 * 60), no recent slots
  }
}

namespace {

// One FreqKV setting and the chunks that drive it through three compressions: one that fills
// the window, then the room each compression leaves (N - S - L - R) in uneven pieces and in
// single decode tokens.
struct StepCase {
  uint32_t window, sinks, recent;
  float retain_ratio;
  bool null_params;  // NULL policy_params: the paper's defaults (the values above must match them)

  uint32_t retained() const { return static_cast<uint32_t>(std::floor(double(retain_ratio) * (window - sinks - recent))); }
  uint32_t kept() const { return sinks + retained() + recent; }
  std::vector<uint32_t> chunks() const {
    const uint32_t room = window - kept();
    REQUIRE(room >= 4);
    return {window, room / 2, 1, room - room / 2 - 1, 1, 1, 1, room - 3};
  }
};

}  // namespace

TEST_CASE("FREQKV on the CPU follows section 3.4 step by step") {
  const StepCase cases[] = {
      {40, 4, 0, 0.5f, true},     // the paper: 36 slots after the sinks become 18
      {45, 3, 5, 0.5f, false},    // recent tokens: a middle of 37 (odd) becomes 18, 5 kept after it
      {23, 2, 6, 0.7f, false},    // 15 become 10: the 6 recent slots move onto rows they overlap
      {64, 8, 8, 0.5f, false},    // the authors' 8 sinks and 8 recent tokens: 48 become 24
  };
  for (const StepCase& c : cases)
    for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
      const Dtype storage = static_cast<Dtype>(dtype);
      const uint32_t window = c.window, sinks = c.sinks, recent = c.recent, retained = c.retained();
      const uint32_t middle = window - sinks - recent;
      test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU);
      const kvc_freqkv_params params{sizeof(kvc_freqkv_params), sinks, c.retain_ratio, recent};
      const kvc_cache_desc desc = freqkv_desc(dtype, window, c.null_params ? nullptr : &params);
      test::CachePtr cache = test::make_cache(cpu.get(), desc);
      const uint32_t row = desc.num_kv_heads * desc.head_dim, dim = desc.head_dim;
      const size_t element = dtype_size(storage), row_bytes = dim * element;
      uint64_t compressions = 0;
      for (uint32_t n : c.chunks()) {
        for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
          const test::StepInputs in = test::random_step_inputs(desc, n);
          const test::LayerSnapshot before_append = test::snapshot(cache.get(), layer);
          // One token more than the room is refused and changes nothing.
          const uint32_t room = window - before_append.slots;
          std::vector<unsigned char> too_many((room + 1) * row * element);
          CHECK(kvc_cache_append(cache.get(), layer, room + 1, dtype, too_many.data(), too_many.data()) == KVC_ERROR_CAPACITY);
          CHECK(test::snapshot(cache.get(), layer) == before_append);

          REQUIRE(kvc_cache_append(cache.get(), layer, n, dtype, in.k.data(), in.v.data()) == KVC_OK);
          const test::LayerSnapshot full = test::snapshot(cache.get(), layer);
          std::vector<unsigned char> out(in.q.size());
          REQUIRE(kvc_attend(cache.get(), layer, n, dtype, in.q.data(), out.data(), nullptr) == KVC_OK);
          const test::LayerSnapshot after = test::snapshot(cache.get(), layer);
          INFO(std::string(dtype_name(storage)), " N ", window, " S ", sinks, " R ", recent, " layer ", layer, " chunk ", n, " held ", full.slots);
          for (uint32_t head = 0; head < desc.num_kv_heads; ++head)
            for (uint32_t slot = 0; slot < after.slots; ++slot) CHECK(after.positions[head * after.slots + slot] == int32_t(slot));
          if (full.slots < window) {
            CHECK(after == full);
            continue;
          }
          ++compressions;
          REQUIRE(after.slots == sinks + retained + recent);
          using Pair = std::pair<const std::vector<unsigned char>*, const std::vector<unsigned char>*>;
          for (const Pair& states : {Pair{&full.k, &after.k}, Pair{&full.v, &after.v}}) {
            const std::vector<float> held = test::decode(*states.first, storage), kept = test::decode(*states.second, storage);
            std::vector<float> got, expected;
            for (uint32_t head = 0; head < desc.num_kv_heads; ++head) {
              const unsigned char* held_head = states.first->data() + size_t(head) * window * row_bytes;
              const unsigned char* kept_head = states.second->data() + size_t(head) * after.slots * row_bytes;
              // Sinks: the same bytes as the tokens appended first; recent tokens: the same
              // bytes as the window's last R, right after the compressed slots.
              CHECK(std::memcmp(kept_head, held_head, sinks * row_bytes) == 0);
              CHECK(std::memcmp(kept_head + (sinks + retained) * row_bytes, held_head + (window - recent) * row_bytes,
                                recent * row_bytes) == 0);
              for (uint32_t d = 0; d < dim; ++d) {
                std::vector<long double> signal(middle);
                for (uint32_t s = 0; s < middle; ++s) signal[s] = held[(size_t(head) * window + sinks + s) * dim + d];
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
