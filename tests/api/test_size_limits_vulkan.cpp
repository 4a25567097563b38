// Sizes past what one storage-buffer binding covers (maxStorageBufferRange, below 2^32 on every
// device) are refused with KVC_ERROR_CAPACITY naming that limit, before anything is allocated
// or any input is read.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/api_helpers.h"
#include "support/engine_paths.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("a layer whose K passes 2^32 bytes is refused at creation, naming the binding limit") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_VULKAN);
  REQUIRE(context);
  // 2 kv heads x head_dim 64 x 4 bytes = 512 bytes a slot: 2^23 slots make 2^32 bytes, 2^28 make 2^37.
  for (uint32_t capacity : {1u << 23, 1u << 28}) {
    const kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, capacity);
    kvc_cache* cache = nullptr;
    CHECK(kvc_cache_create(context.get(), &desc, &cache) == KVC_ERROR_CAPACITY);
    CHECK(cache == nullptr);
    const std::string message = kvc_context_last_error(context.get());
    INFO(message);
    CHECK(message.find("one layer's K") != std::string::npos);
    CHECK(message.find("maxStorageBufferRange") != std::string::npos);
  }
}

TEST_CASE("an attend whose queries pass the binding limit is refused before any query is read") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_VULKAN);
  REQUIRE(context);
  // 4096 query heads x head_dim 256 x 4 bytes = 2^22 bytes a query: 1024 queries make 2^32,
  // while the 1024 tokens' K (one kv head) take 2^20.
  kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, 1024);
  desc.num_layers = 1;
  desc.num_q_heads = 4096;
  desc.num_kv_heads = 1;
  desc.head_dim = 256;
  test::CachePtr cache = test::make_cache(context.get(), desc);
  const uint32_t tokens = 1024, kv = desc.num_kv_heads * desc.head_dim, qd = desc.num_q_heads * desc.head_dim;
  const std::vector<float> k = test::random_floats(tokens * kv), v = test::random_floats(tokens * kv);
  REQUIRE(kvc_cache_append(cache.get(), 0, tokens, KVC_DTYPE_F32, k.data(), v.data()) == KVC_OK);
  // One query and its output: reading more would run past them.
  std::vector<float> one_q(qd), one_out(qd);
  test::expect_refused(context.get(), cache.get(), KVC_ERROR_CAPACITY,
                       [&] { return kvc_attend(cache.get(), 0, tokens, KVC_DTYPE_F32, one_q.data(), one_out.data(), nullptr); },
                       "maxStorageBufferRange");
  const test::BufferPtr query = test::make_buffer(context.get(), 2 * qd * sizeof(float));
  const kvc_buffer_view q_view{query.get(), 0}, out_view{query.get(), qd * sizeof(float)};
  test::expect_refused(context.get(), cache.get(), KVC_ERROR_CAPACITY,
                       [&] { return kvc_attend_device(cache.get(), 0, tokens, KVC_DTYPE_F32, q_view, out_view, {}); },
                       "maxStorageBufferRange");
}

}  // namespace kvc
