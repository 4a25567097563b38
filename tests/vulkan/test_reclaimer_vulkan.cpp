// vk::Reclaimer: device-local buffers given back are kept for reuse within its budget (the
// smallest that fits, wasting at most 1/8), the oldest freed past it, others freed on its
// thread; free_all and its destructor free everything. Through the C API: a selection's prompt
// storage comes back at kvc_cache_reset with no allocation, and kvc_context_trim gives it all
// back to the device.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "api/handles.h"
#include "support/api_helpers.h"
#include "support/engine_paths.h"
#include "support/test_support.h"
#include "vulkan/buffer.h"
#include "vulkan/device.h"
#include "vulkan/reclaimer.h"

namespace kvc {
namespace {

std::unique_ptr<vk::Buffer> device_buffer(vk::Device& device, VkDeviceSize bytes) {
  return std::make_unique<vk::Buffer>(device, bytes, vk::MemoryKind::DeviceLocal);
}

std::vector<std::unique_ptr<vk::Buffer>> one(std::unique_ptr<vk::Buffer> buffer) {
  std::vector<std::unique_ptr<vk::Buffer>> buffers;
  buffers.push_back(std::move(buffer));
  return buffers;
}

// KVC_BUFFER_REUSE=0: the device keeps nothing for reuse (vulkan/device.cpp).
bool reuse_off() {
  const char* reuse = std::getenv("KVC_BUFFER_REUSE");
  return reuse && std::string(reuse) == "0";
}

}  // namespace

TEST_CASE("the reclaimer keeps device-local buffers for reuse within its budget and frees the rest") {
  Backend* backend = test::vulkan_backend();
  if (!backend) return;
  vk::Device& device = backend->device();
  device.reclaimer().free_all();  // the shared backend's own: nothing of it is freed while we count
  const uint64_t before = device.allocated_bytes();

  vk::Reclaimer reclaimer(20000);
  std::unique_ptr<vk::Buffer> mid = device_buffer(device, 12345);
  const vk::Buffer* mid_address = mid.get();
  reclaimer.give_back(one(std::move(mid)));
  reclaimer.give_back(one(device_buffer(device, 4097)));
  reclaimer.give_back(one(std::make_unique<vk::Buffer>(device, 777, vk::MemoryKind::HostVisible)));  // never kept
  reclaimer.give_back(one(device_buffer(device, 20001)));  // past the budget alone
  CHECK(reclaimer.kept_bytes() == 12345 + 4097);

  CHECK(reclaimer.take(12346) == nullptr);                     // too small
  CHECK(reclaimer.take(12345 * 8 / 9 - 1) == nullptr);         // would waste more than 1/8
  std::unique_ptr<vk::Buffer> again = reclaimer.take(11000);  // the smallest that fits
  REQUIRE(again != nullptr);
  CHECK(again.get() == mid_address);
  CHECK(again->size() == 12345);
  CHECK(reclaimer.kept_bytes() == 4097);

  // 4097 + 12345 + 4097 passes 20000: the oldest kept, the first 4097, is freed.
  reclaimer.give_back(one(std::move(again)));
  reclaimer.give_back(one(device_buffer(device, 4097)));
  CHECK(reclaimer.kept_bytes() == 12345 + 4097);

  CHECK(reclaimer.free_all());
  CHECK(reclaimer.kept_bytes() == 0);
  CHECK(device.allocated_bytes() == before);
  CHECK_FALSE(reclaimer.free_all());  // nothing left

  {
    vk::Reclaimer ending(1 << 20);
    ending.give_back(one(device_buffer(device, 2000003)));  // past the budget: freed on its thread
    ending.give_back(one(device_buffer(device, 5000)));     // kept
  }
  CHECK(device.allocated_bytes() == before);
  vk::Reclaimer never_used(0);
  CHECK_FALSE(never_used.free_all());
  vk::Reclaimer keeps_nothing(0);
  keeps_nothing.give_back(one(device_buffer(device, 0)));  // an empty tensor's buffer
  CHECK(keeps_nothing.take(0) == nullptr);
  keeps_nothing.free_all();
  CHECK(device.allocated_bytes() == before);
}

TEST_CASE("a selection's prompt storage comes back at kvc_cache_reset with no allocation; kvc_context_trim gives it all back") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_VULKAN);
  if (!context) return;
  vk::Device& device = context->backend->device();
  const test::PolicyCase c = test::policy_case(KVC_POLICY_SNAPKV);
  const kvc_cache_desc desc = c.desc(KVC_DTYPE_F16);
  test::CachePtr cache = test::make_cache(context.get(), desc);
  const test::StepInputs in = test::random_step_inputs(desc, c.prompt_tokens());
  std::vector<unsigned char> out(in.q.size());
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
    REQUIRE(kvc_cache_append(cache.get(), layer, c.prompt_tokens(), desc.dtype, in.k.data(), in.v.data()) == KVC_OK);
    REQUIRE(kvc_attend(cache.get(), layer, c.prompt_tokens(), desc.dtype, in.q.data(), out.data(), nullptr) == KVC_OK);
  }
  const uint64_t prompt_held = test::cache_stats(cache.get()).device_bytes_held;

  REQUIRE(kvc_step_begin(context.get()) == KVC_OK);
  REQUIRE_MESSAGE(kvc_cache_end_prefill(cache.get()) == KVC_OK, kvc_context_last_error(context.get()));
  REQUIRE(kvc_step_end(context.get()) == KVC_OK);
  REQUIRE(kvc_step_wait(context.get(), UINT64_MAX) == KVC_OK);
  const uint64_t kept_held = test::cache_stats(cache.get()).device_bytes_held;
  INFO("the prompt held ", prompt_held, " bytes, the selection keeps ", kept_held);
  REQUIRE(kept_held < prompt_held);
  // The prompt's storage is kept for reuse, and reported with the context's work memory.
  if (!reuse_off()) CHECK(test::context_info(context.get()).work_bytes_held >= prompt_held - kept_held);

  const uint64_t allocated = device.allocated_bytes();
  REQUIRE(kvc_cache_reset(cache.get()) == KVC_OK);
  if (!reuse_off()) CHECK(device.allocated_bytes() == allocated);  // the storage came back from the reclaimer
  CHECK(test::cache_stats(cache.get()).device_bytes_held == prompt_held);

  cache.reset();
  REQUIRE(kvc_context_trim(context.get()) == KVC_OK);
  CHECK(device.allocated_bytes() + prompt_held <= (reuse_off() ? allocated + prompt_held - kept_held : allocated));
}

}  // namespace kvc
