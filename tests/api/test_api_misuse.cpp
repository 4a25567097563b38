// API misuse returns the right status and a message, and leaves the cache exactly as it was.
// Runs on the CPU backend (argument checks come before any backend work), so it also runs
// under the sanitizers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "api/handles.h"
#include "support/api_helpers.h"
#include "support/engine_paths.h"
#include "support/test_support.h"

namespace kvc {
namespace {

struct Fixture {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  kvc_cache_desc desc;
  test::CachePtr cache;
  uint32_t kv, qd;
  std::vector<float> k, v, q, out;

  explicit Fixture(const kvc_cache_desc& shape = test::small_cache_desc(KVC_DTYPE_F32, 64))
      : desc(shape),
        cache(test::make_cache(context.get(), desc)),
        kv(desc.num_kv_heads * desc.head_dim),
        qd(desc.num_q_heads * desc.head_dim),
        k(test::random_floats(8 * kv)),
        v(test::random_floats(8 * kv)),
        q(test::random_floats(8 * qd)),
        out(8 * qd) {
    REQUIRE(kvc_cache_append(cache.get(), 0, 4, KVC_DTYPE_F32, k.data(), v.data()) == KVC_OK);
    REQUIRE(kvc_attend(cache.get(), 0, 4, KVC_DTYPE_F32, q.data(), out.data(), nullptr) == KVC_OK);
  }

  // Runs `call`, expects `status` with a message holding `message_part`, and the cache unchanged.
  template <typename Call>
  void expect_refused(kvc_status status, Call&& call, const std::string& message_part = "") {
    test::expect_refused(context.get(), cache.get(), status, call, message_part);
  }
};

}  // namespace

TEST_CASE("status names and version") {
  CHECK(std::string(kvc_status_name(KVC_OK)) == "KVC_OK");
  CHECK(std::string(kvc_status_name(KVC_ERROR_DTYPE_MISMATCH)) == "KVC_ERROR_DTYPE_MISMATCH");
  CHECK(std::string(kvc_status_name(static_cast<kvc_status>(999))).find("unknown") != std::string::npos);
  CHECK(kvc_version_number() == KVC_VERSION_NUMBER);
  CHECK(std::string(kvc_version_string()) == std::to_string(KVC_VERSION_MAJOR) + "." + std::to_string(KVC_VERSION_MINOR) +
                                                 "." + std::to_string(KVC_VERSION_PATCH));
}

TEST_CASE("null handles and pointers are refused, never dereferenced") {
  Fixture f;
  CHECK(kvc_cache_append(nullptr, 0, 1, KVC_DTYPE_F32, f.k.data(), f.v.data()) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_attend(nullptr, 0, 1, KVC_DTYPE_F32, f.q.data(), f.out.data(), nullptr) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_cache_create(nullptr, &f.desc, nullptr) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_context_create(nullptr, nullptr) == KVC_ERROR_NULL_POINTER);
  CHECK(std::strlen(kvc_last_create_error()) > 0);
  kvc_cache* none = nullptr;
  CHECK(kvc_cache_create(f.context.get(), nullptr, &none) == KVC_ERROR_NULL_POINTER);
  CHECK(none == nullptr);
  f.expect_refused(KVC_ERROR_NULL_POINTER, [&] { return kvc_cache_append(f.cache.get(), 0, 1, KVC_DTYPE_F32, nullptr, f.v.data()); });
  f.expect_refused(KVC_ERROR_NULL_POINTER, [&] { return kvc_attend(f.cache.get(), 0, 1, KVC_DTYPE_F32, f.q.data(), nullptr, nullptr); });
  f.expect_refused(KVC_ERROR_NULL_POINTER, [&] { return kvc_cache_layer_slots(f.cache.get(), 0, nullptr); });
  kvc_cache_destroy(nullptr);
  kvc_context_destroy(nullptr);
}

TEST_CASE("layer out of range, zero sizes, capacity and short output buffers") {
  Fixture f;
  f.expect_refused(KVC_ERROR_OUT_OF_RANGE, [&] { return kvc_cache_append(f.cache.get(), 2, 1, KVC_DTYPE_F32, f.k.data(), f.v.data()); });
  f.expect_refused(KVC_ERROR_OUT_OF_RANGE, [&] { return kvc_attend(f.cache.get(), 7, 1, KVC_DTYPE_F32, f.q.data(), f.out.data(), nullptr); });
  f.expect_refused(KVC_ERROR_INVALID_ARGUMENT, [&] { return kvc_cache_append(f.cache.get(), 0, 0, KVC_DTYPE_F32, f.k.data(), f.v.data()); });
  f.expect_refused(KVC_ERROR_INVALID_ARGUMENT, [&] { return kvc_attend(f.cache.get(), 0, 0, KVC_DTYPE_F32, f.q.data(), f.out.data(), nullptr); });
  std::vector<float> big(61 * f.kv);
  f.expect_refused(KVC_ERROR_CAPACITY, [&] { return kvc_cache_append(f.cache.get(), 0, 61, KVC_DTYPE_F32, big.data(), big.data()); });
  std::vector<float> room(4 * f.kv);
  f.expect_refused(KVC_ERROR_BUFFER_TOO_SMALL, [&] { return kvc_cache_read(f.cache.get(), 0, 3, KVC_DTYPE_F32, room.data(), nullptr, nullptr); });
}

TEST_CASE("counts past the room are refused before any input is read, under every policy") {
  for (const test::PolicyCase& c : test::policy_cases()) {
    Fixture f(c.desc(KVC_DTYPE_F32));
    // One token's K and V, one query and its output, on the host and in buffers: any read past
    // them is a heap overflow the sanitizer run reports, or a crash here.
    std::vector<float> one_k(f.kv), one_v(f.kv), one_q(f.qd), one_out(f.qd);
    const test::BufferPtr token = test::make_buffer(f.context.get(), 2 * f.kv * sizeof(float));
    const test::BufferPtr query = test::make_buffer(f.context.get(), 2 * f.qd * sizeof(float));
    const kvc_buffer_view k_view{token.get(), 0}, v_view{token.get(), f.kv * sizeof(float)};
    const kvc_buffer_view q_view{query.get(), 0}, out_view{query.get(), f.qd * sizeof(float)};
    // 65: past every case's room (FULL's 64 slots); 2^31 and 2^32 - 1: byte counts past 2^32.
    for (uint32_t n : {65u, 1u << 31, UINT32_MAX}) {
      INFO(c.name, ", ", n, " tokens");
      const std::string count = std::to_string(n);
      f.expect_refused(KVC_ERROR_CAPACITY, [&] { return kvc_cache_append(f.cache.get(), 0, n, KVC_DTYPE_F32, one_k.data(), one_v.data()); }, count);
      f.expect_refused(KVC_ERROR_CAPACITY, [&] { return kvc_cache_append_device(f.cache.get(), 0, n, KVC_DTYPE_F32, k_view, v_view); }, count);
      f.expect_refused(KVC_ERROR_BAD_STATE, [&] { return kvc_attend(f.cache.get(), 0, n, KVC_DTYPE_F32, one_q.data(), one_out.data(), nullptr); },
                       count);
      f.expect_refused(KVC_ERROR_BAD_STATE, [&] { return kvc_attend_device(f.cache.get(), 0, n, KVC_DTYPE_F32, q_view, out_view, {}); }, count);
    }
  }
}

TEST_CASE("FAEDKV refuses a stream whose positions would pass 2^31 - 1") {
  const test::PolicyCase c = test::policy_case(KVC_POLICY_FAEDKV);
  Fixture f(c.desc(KVC_DTYPE_F32));
  const std::vector<float> prompt_k = test::random_floats(c.prompt_tokens() * f.kv), prompt_v = test::random_floats(c.prompt_tokens() * f.kv);
  REQUIRE(kvc_cache_reset(f.cache.get()) == KVC_OK);
  for (uint32_t layer = 0; layer < f.desc.num_layers; ++layer)
    REQUIRE(kvc_cache_append(f.cache.get(), layer, c.prompt_tokens(), KVC_DTYPE_F32, prompt_k.data(), prompt_v.data()) == KVC_OK);
  REQUIRE(kvc_cache_end_prefill(f.cache.get()) == KVC_OK);
  // Streaming 2^31 tokens takes hours: the count moves there instead.
  f.cache->cache->layer(0).tokens_seen = INT32_MAX;
  f.expect_refused(KVC_ERROR_CAPACITY, [&] { return kvc_cache_append(f.cache.get(), 0, 2, KVC_DTYPE_F32, f.k.data(), f.v.data()); }, "2^31 - 1");
  CHECK(kvc_cache_append(f.cache.get(), 0, 1, KVC_DTYPE_F32, f.k.data(), f.v.data()) == KVC_OK);
  std::vector<int32_t> positions(f.desc.num_kv_heads * 64);
  uint32_t slots = 0;
  REQUIRE(kvc_cache_layer_slots(f.cache.get(), 0, &slots) == KVC_OK);
  REQUIRE(kvc_cache_read(f.cache.get(), 0, 64, KVC_DTYPE_F32, nullptr, nullptr, positions.data()) == KVC_OK);
  CHECK(*std::max_element(positions.begin(), positions.begin() + slots) == INT32_MAX);
}

TEST_CASE("NaN or Inf input is refused") {
  Fixture f;
  std::vector<float> bad_k = f.k;
  bad_k[5] = NAN;
  f.expect_refused(KVC_ERROR_NOT_FINITE, [&] { return kvc_cache_append(f.cache.get(), 0, 2, KVC_DTYPE_F32, bad_k.data(), f.v.data()); });
  std::vector<float> bad_q = f.q;
  bad_q[1] = INFINITY;
  f.expect_refused(KVC_ERROR_NOT_FINITE, [&] { return kvc_attend(f.cache.get(), 0, 1, KVC_DTYPE_F32, bad_q.data(), f.out.data(), nullptr); });
}

TEST_CASE("attend before any append, or with more queries than the last append, is out of order") {
  Fixture f;
  f.expect_refused(KVC_ERROR_BAD_STATE, [&] { return kvc_attend(f.cache.get(), 1, 1, KVC_DTYPE_F32, f.q.data(), f.out.data(), nullptr); });
  f.expect_refused(KVC_ERROR_BAD_STATE, [&] { return kvc_attend(f.cache.get(), 0, 5, KVC_DTYPE_F32, f.q.data(), f.out.data(), nullptr); });
}

TEST_CASE("data in a dtype the cache does not store is refused") {
  Fixture f;
  f.expect_refused(KVC_ERROR_DTYPE_MISMATCH, [&] { return kvc_cache_append(f.cache.get(), 0, 1, KVC_DTYPE_F16, f.k.data(), f.v.data()); });
  f.expect_refused(KVC_ERROR_DTYPE_MISMATCH, [&] { return kvc_attend(f.cache.get(), 0, 1, KVC_DTYPE_F16, f.q.data(), f.out.data(), nullptr); });
  f.expect_refused(KVC_ERROR_DTYPE_MISMATCH, [&] { return kvc_cache_append(f.cache.get(), 0, 1, static_cast<kvc_dtype>(9), f.k.data(), f.v.data()); });
}

TEST_CASE("bad cache descriptors are refused with a message naming the field") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  struct Case {
    const char* field;
    void (*edit)(kvc_cache_desc&);
  };
  const Case cases[] = {
      {"struct_size", [](kvc_cache_desc& d) { d.struct_size = 8; }},
      {"num_layers", [](kvc_cache_desc& d) { d.num_layers = 0; }},
      {"num_q_heads", [](kvc_cache_desc& d) { d.num_q_heads = 7; }},
      // One more than a dispatch gives query heads; and 2^32 - 2: a prefill's Q bytes past 2^64.
      {"num_q_heads", [](kvc_cache_desc& d) { d.num_q_heads = 65536; }},
      {"num_q_heads", [](kvc_cache_desc& d) { d.num_q_heads = UINT32_MAX - 1; d.capacity = 1u << 28; }},
      {"num_kv_heads", [](kvc_cache_desc& d) { d.num_kv_heads = 0; }},
      {"head_dim", [](kvc_cache_desc& d) { d.head_dim = 100; }},
      {"dtype", [](kvc_cache_desc& d) { d.dtype = static_cast<kvc_dtype>(3); }},
      {"capacity", [](kvc_cache_desc& d) { d.capacity = 0; }},
      {"policy", [](kvc_cache_desc& d) { d.policy = static_cast<kvc_policy>(99); }},
      {"rope_style", [](kvc_cache_desc& d) { d.rope_style = static_cast<kvc_rope_style>(5); }},
      {"rope_dims", [](kvc_cache_desc& d) { d.rope_dims = 12; }},
      {"rope_theta", [](kvc_cache_desc& d) { d.rope_theta = NAN; }},
  };
  for (const Case& c : cases) {
    kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, 16);
    c.edit(desc);
    kvc_cache* cache = nullptr;
    CHECK(kvc_cache_create(context.get(), &desc, &cache) == KVC_ERROR_INVALID_ARGUMENT);
    CHECK(cache == nullptr);
    INFO("message: ", kvc_context_last_error(context.get()));
    CHECK(std::string(kvc_context_last_error(context.get())).find(c.field) != std::string::npos);
  }
}

TEST_CASE("bad context descriptors are refused; a context outlives caches destroyed after it") {
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = static_cast<kvc_backend>(7);
  kvc_context* context = nullptr;
  CHECK(kvc_context_create(&desc, &context) == KVC_ERROR_INVALID_ARGUMENT);
  CHECK(context == nullptr);
  desc = kvc_context_desc_default();
  desc.struct_size = 4;
  CHECK(kvc_context_create(&desc, &context) == KVC_ERROR_INVALID_ARGUMENT);

  test::ContextPtr owner = test::make_context(KVC_BACKEND_CPU);
  kvc_cache* cache = test::make_cache(owner.get(), test::small_cache_desc(KVC_DTYPE_F16, 8)).release();
  kvc_context_destroy(owner.release());  // deferred while the cache lives
  std::vector<uint16_t> kv(2 * 64, 0x3c00);
  CHECK(kvc_cache_append(cache, 1, 1, KVC_DTYPE_F16, kv.data(), kv.data()) == KVC_OK);
  kvc_cache_destroy(cache);  // frees the context too (the sanitizer run checks for leaks)
}

TEST_CASE("reset forgets every token and keeps the storage") {
  Fixture f;
  kvc_cache_stats before{sizeof(kvc_cache_stats)};
  REQUIRE(kvc_cache_stats_get(f.cache.get(), &before) == KVC_OK);
  REQUIRE(kvc_cache_reset(f.cache.get()) == KVC_OK);
  kvc_cache_stats after{sizeof(kvc_cache_stats)};
  REQUIRE(kvc_cache_stats_get(f.cache.get(), &after) == KVC_OK);
  CHECK(after.slots_held == 0);
  CHECK(after.tokens_seen == 0);
  CHECK(after.device_bytes_held == before.device_bytes_held);
  CHECK(kvc_attend(f.cache.get(), 0, 1, KVC_DTYPE_F32, f.q.data(), f.out.data(), nullptr) == KVC_ERROR_BAD_STATE);
}

}  // namespace kvc
