// vk::Reclaimer: buffers handed to it are freed on its thread; drain() and its destructor wait
// for them; through the C API, what a step released is back on the device once
// kvc_context_trim returns.
#include <doctest/doctest.h>

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

// Odd sizes in both kinds of memory.
std::vector<std::unique_ptr<vk::Buffer>> make_buffers(vk::Device& device) {
  std::vector<std::unique_ptr<vk::Buffer>> buffers;
  for (VkDeviceSize size : {VkDeviceSize(1000003), VkDeviceSize(4097), VkDeviceSize(12345)})
    buffers.push_back(std::make_unique<vk::Buffer>(device, size, vk::MemoryKind::DeviceLocal));
  buffers.push_back(std::make_unique<vk::Buffer>(device, 777, vk::MemoryKind::HostVisible));
  return buffers;
}

}  // namespace

TEST_CASE("the reclaimer frees what it is handed; drain and its destructor wait for it") {
  Backend* backend = test::vulkan_backend();
  if (!backend) return;
  vk::Device& device = backend->device();
  device.reclaimer().drain();  // what earlier cases released
  const uint64_t before = device.allocated_bytes();

  std::vector<std::unique_ptr<vk::Buffer>> buffers = make_buffers(device);
  CHECK(device.allocated_bytes() >= before + 1000003 + 4097 + 12345 + 777);
  vk::Reclaimer reclaimer;
  reclaimer.free_later(std::move(buffers));
  reclaimer.drain();
  CHECK(device.allocated_bytes() == before);
  CHECK_FALSE(reclaimer.drain());  // nothing left to wait for

  {
    vk::Reclaimer ending;
    ending.free_later(make_buffers(device));
    ending.free_later(make_buffers(device));
  }
  CHECK(device.allocated_bytes() == before);
  vk::Reclaimer never_used;
  CHECK_FALSE(never_used.drain());
}

TEST_CASE("a prompt's storage that a selection released, and a destroyed cache, are back once kvc_context_trim returns") {
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
  const uint64_t with_prompt = device.allocated_bytes();

  REQUIRE(kvc_step_begin(context.get()) == KVC_OK);
  REQUIRE_MESSAGE(kvc_cache_end_prefill(cache.get()) == KVC_OK, kvc_context_last_error(context.get()));
  REQUIRE(kvc_step_end(context.get()) == KVC_OK);
  REQUIRE(kvc_step_wait(context.get(), UINT64_MAX) == KVC_OK);
  const uint64_t kept_held = test::cache_stats(cache.get()).device_bytes_held;
  INFO("the prompt held ", prompt_held, " bytes, the selection keeps ", kept_held);
  REQUIRE(kept_held < prompt_held);
  REQUIRE(kvc_context_trim(context.get()) == KVC_OK);
  const uint64_t with_selection = device.allocated_bytes();
  CHECK(with_selection + (prompt_held - kept_held) <= with_prompt);

  cache.reset();
  REQUIRE(kvc_context_trim(context.get()) == KVC_OK);
  CHECK(device.allocated_bytes() + kept_held <= with_selection);
}

}  // namespace kvc
