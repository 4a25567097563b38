// The context's work memory through the C API: kvc_context_info reports what the kernels keep
// between calls (scratch, FFT plans), kvc_context_trim gives back what no cache holds, and the
// calls after a trim compute what they computed before it.
#include <doctest/doctest.h>

#include "support/api_helpers.h"
#include "support/engine_paths.h"
#include "support/test_support.h"

namespace kvc {
namespace {

uint64_t work_bytes_held(kvc_context* context) {
  kvc_context_info info{sizeof(kvc_context_info)};
  REQUIRE(kvc_context_info_get(context, &info) == KVC_OK);
  return info.work_bytes_held;
}

}  // namespace

TEST_CASE("kvc_context_trim gives back the scratch of a prefill, and attention after it is unchanged") {
  for (kvc_backend backend : {KVC_BACKEND_VULKAN, KVC_BACKEND_CPU}) {
    test::ContextPtr context = test::make_context(backend);
    REQUIRE(context);
    const kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F16, 400);
    test::CachePtr cache = test::make_cache(context.get(), desc);
    const uint32_t n = 301;
    const test::StepInputs in = test::random_step_inputs(desc, n);
    REQUIRE(kvc_cache_append(cache.get(), 0, n, KVC_DTYPE_F16, in.k.data(), in.v.data()) == KVC_OK);
    const uint64_t before = work_bytes_held(context.get());
    std::vector<unsigned char> out_before(in.q.size()), out_after(in.q.size());
    REQUIRE(kvc_attend(cache.get(), 0, n, KVC_DTYPE_F16, in.q.data(), out_before.data(), nullptr) == KVC_OK);
    const uint64_t after_prefill = work_bytes_held(context.get());
    const char* backend_name = backend == KVC_BACKEND_VULKAN ? "Vulkan" : "CPU";
    INFO(backend_name, ": ", before, " bytes, then ", after_prefill, " after the prefill");
    // On Vulkan the chunk's rotated queries and softmax statistics stay in scratch.
    if (backend == KVC_BACKEND_VULKAN) CHECK(after_prefill >= before + uint64_t(n) * desc.num_q_heads * desc.head_dim * 4);

    REQUIRE(kvc_step_begin(context.get()) == KVC_OK);
    CHECK(kvc_context_trim(context.get()) == KVC_ERROR_BAD_STATE);
    CHECK(std::string(kvc_context_last_error(context.get())).find("step") != std::string::npos);
    REQUIRE(kvc_step_end(context.get()) == KVC_OK);
    REQUIRE(kvc_step_wait(context.get(), UINT64_MAX) == KVC_OK);

    REQUIRE(kvc_context_trim(context.get()) == KVC_OK);
    CHECK(work_bytes_held(context.get()) <= before);
    REQUIRE(kvc_attend(cache.get(), 0, n, KVC_DTYPE_F16, in.q.data(), out_after.data(), nullptr) == KVC_OK);
    CHECK(out_after == out_before);
  }
}

TEST_CASE("kvc_context_trim keeps the FFT plans a FAEDKV cache holds and frees them once it is gone") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_VULKAN);
  REQUIRE(context);
  const test::PolicyCase c = test::policy_case(KVC_POLICY_FAEDKV);
  const kvc_cache_desc desc = c.desc(KVC_DTYPE_F32);
  test::CachePtr cache = test::make_cache(context.get(), desc);
  const test::StepInputs prompt = test::random_step_inputs(desc, c.prompt_tokens());
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer)
    REQUIRE(kvc_cache_append(cache.get(), layer, c.prompt_tokens(), KVC_DTYPE_F32, prompt.k.data(), prompt.v.data()) == KVC_OK);
  // The prompt's transforms run in a step that is still in flight when the trim comes: the
  // trim waits for it before it frees the plans that step uses (a crash and validation
  // messages when it did not).
  REQUIRE(kvc_step_begin(context.get()) == KVC_OK);
  REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
  REQUIRE(kvc_step_end(context.get()) == KVC_OK);
  REQUIRE(kvc_context_trim(context.get()) == KVC_OK);
  REQUIRE(kvc_step_wait(context.get(), UINT64_MAX) == KVC_OK);
  const test::StepInputs token = test::random_step_inputs(desc, 1);
  std::vector<unsigned char> out(token.q.size());
  REQUIRE(kvc_cache_append(cache.get(), 0, 1, KVC_DTYPE_F32, token.k.data(), token.v.data()) == KVC_OK);
  REQUIRE(kvc_attend(cache.get(), 0, 1, KVC_DTYPE_F32, token.q.data(), out.data(), nullptr) == KVC_OK);
  kvc_context_info info{sizeof(kvc_context_info)};
  REQUIRE(kvc_context_info_get(context.get(), &info) == KVC_OK);
  CHECK(info.validation_messages == 0);
  const uint64_t with_cache = work_bytes_held(context.get());
  CHECK(with_cache > 0);  // the decode step's chirp-z plan and filter, which the cache keeps
  cache.reset();
  REQUIRE(kvc_context_trim(context.get()) == KVC_OK);
  CHECK(work_bytes_held(context.get()) < with_cache);
}

}  // namespace kvc
