// The Vulkan runtime: a context over an application's own Vulkan objects, device choice by index,
// timestamps, pipeline reuse, pushed descriptors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/api_helpers.h"
#include "support/attention_case.h"
#include "support/test_support.h"
#include "vulkan/device.h"
#include "vulkan/pipeline.h"
#include "vulkan/recorder.h"
#include "vulkan/shader_registry.h"

namespace kvc {

namespace {

kvc_context_info context_info(kvc_context* context) {
  kvc_context_info info{sizeof(kvc_context_info)};
  REQUIRE(kvc_context_info_get(context, &info) == KVC_OK);
  return info;
}

}  // namespace

TEST_CASE("a context reports its matrix path: lavapipe, the opt-out flag and the CPU take SIMT") {
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = KVC_BACKEND_VULKAN;
  kvc_context* context = nullptr;
  REQUIRE(kvc_context_create(&desc, &context) == KVC_OK);
  test::ContextPtr owned(context);
  const kvc_context_info info = context_info(context);
  const std::string detail = info.matrix_path_detail;
  MESSAGE(info.device_name, ": ", detail);
  CHECK((info.matrix_path == KVC_MATRIX_PATH_SIMT || info.matrix_path == KVC_MATRIX_PATH_COOPERATIVE));
  CHECK(detail.rfind(info.matrix_path == KVC_MATRIX_PATH_SIMT ? "SIMT: " : "VK_KHR_cooperative_matrix: ", 0) == 0);
  // Lavapipe (Mesa 22.3) offers no VK_KHR_cooperative_matrix: the fallback, and it says why.
  if (std::strstr(info.device_name, "llvmpipe")) {
    CHECK(info.matrix_path == KVC_MATRIX_PATH_SIMT);
    CHECK(detail.size() > std::strlen("SIMT: "));
  }

  desc.flags = KVC_CONTEXT_NO_COOPERATIVE_MATRIX;
  REQUIRE(kvc_context_create(&desc, &context) == KVC_OK);
  test::ContextPtr opted_out(context);
  const kvc_context_info simt = context_info(context);
  CHECK(simt.matrix_path == KVC_MATRIX_PATH_SIMT);
  CHECK(std::string(simt.matrix_path_detail).find("turned off") != std::string::npos);

  test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU);
  CHECK(context_info(cpu.get()).matrix_path == KVC_MATRIX_PATH_SIMT);
}

TEST_CASE("the build embeds the cooperative-matrix shaders when CI says it installed glslang 13") {
  // .ci/run sets KVC_REQUIRE_COOPMAT_SHADERS=1 after scripts/install-deps.sh: a build that
  // silently fell back to Debian's glslang 12 would compile none of them.
  const char* required = std::getenv("KVC_REQUIRE_COOPMAT_SHADERS");
  for (const char* shader : {"attention_prefill_coopmat", "window_logits_coopmat", "fragment_layout_coopmat"}) {
    const bool embedded = vk::has_embedded_shader(shader);
    const std::string state = std::string(shader) + (embedded ? " embedded" : " not embedded (built without glslang >= 13)");
    MESSAGE(state);
    if (required && std::strcmp(required, "0") != 0) CHECK(embedded);
  }
}

TEST_CASE("a context over the application's own Vulkan device runs attention") {
  // The "application" here is a second kvc device; its raw handles are what an engine passes.
  std::unique_ptr<vk::Device> application = vk::Device::create({});
  kvc_vulkan_handles handles{sizeof(kvc_vulkan_handles)};
  handles.instance = application->instance();
  handles.physical_device = application->physical_device();
  handles.device = application->device();
  handles.queue = application->queue();
  handles.queue_family_index = application->queue_family();
  kvc_context* context = nullptr;
  REQUIRE(kvc_context_create_from_vulkan(&handles, &context) == KVC_OK);
  test::ContextPtr owned(context);
  kvc_context_info info{sizeof(kvc_context_info)};
  REQUIRE(kvc_context_info_get(context, &info) == KVC_OK);
  CHECK(info.backend == KVC_BACKEND_VULKAN);
  CHECK(std::string(info.device_name) == application->name());

  const kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, 32);
  test::CachePtr cache = test::make_cache(context, desc);
  std::vector<float> kv = test::random_floats(5 * desc.num_kv_heads * desc.head_dim), q = test::random_floats(desc.num_q_heads * desc.head_dim);
  std::vector<float> out(q.size(), NAN);
  REQUIRE(kvc_cache_append(cache.get(), 0, 5, KVC_DTYPE_F32, kv.data(), kv.data()) == KVC_OK);
  REQUIRE(kvc_attend(cache.get(), 0, 1, KVC_DTYPE_F32, q.data(), out.data(), nullptr) == KVC_OK);
  for (float value : out) CHECK(std::isfinite(value));
  cache.reset();
  owned.reset();
  CHECK(application->device() != VK_NULL_HANDLE);  // still the application's: libkvc did not destroy it

  handles.device = nullptr;
  CHECK(kvc_context_create_from_vulkan(&handles, &context) == KVC_ERROR_NULL_POINTER);
}

TEST_CASE("device index: in range selects, out of range is refused with a message") {
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = KVC_BACKEND_VULKAN;
  desc.device_index = 0;
  kvc_context* context = nullptr;
  REQUIRE(kvc_context_create(&desc, &context) == KVC_OK);
  kvc_context_destroy(context);
  desc.device_index = 999;
  context = nullptr;
  CHECK(kvc_context_create(&desc, &context) == KVC_ERROR_OUT_OF_RANGE);
  CHECK(context == nullptr);
  CHECK(std::string(kvc_last_create_error()).find("999") != std::string::npos);
}

TEST_CASE("timestamps measure GPU time and pipelines are built once per specialization") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  if (!gpu->device().supports_timestamps()) return;
  std::vector<float> zeros(1 << 16);
  auto tensor = test::make_tensor(*gpu, zeros.data(), zeros.size() * 4);
  gpu->begin();
  const uint32_t start = gpu->recorder().timestamp();
  gpu->recorder().fill(tensor->slice(0, zeros.size() * 4), zeros.size() * 4, 0x3f800000u);
  const uint32_t end = gpu->recorder().timestamp();
  gpu->submit();
  CHECK(gpu->recorder().elapsed_ns(start, end) >= 0.0);
  const std::vector<float> ones = test::decode(test::read_tensor(*gpu, *tensor, zeros.size() * 4), Dtype::F32);
  CHECK(ones.front() == 1.0f);
  CHECK(ones.back() == 1.0f);
  ops::AttentionShape shape;
  shape.num_q_heads = 4;
  shape.num_kv_heads = 2;
  shape.head_dim = 32;
  shape.num_queries = 1;
  shape.num_slots = 77;
  test::AttentionCase::random(shape).run(*gpu, true);
  const size_t pipelines = gpu->device().pipelines().size();
  shape.num_slots = 1234;  // another length: the same pipelines serve it
  test::AttentionCase::random(shape).run(*gpu, true);
  CHECK(gpu->device().pipelines().size() == pipelines);
}

TEST_CASE("dispatches push their buffers where the device offers it; KVC_PUSH_DESCRIPTORS=0 takes a pool's sets") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const auto pushes = [](vk::Device& device) {
    const vk::KernelSpec copy{"copy", 2, sizeof(uint32_t), {256}};
    const bool template_made = device.pipelines().get(copy).push_template() != VK_NULL_HANDLE;
    CHECK(template_made == (device.max_push_descriptors() >= 2));
    return template_made;
  };
  const bool offered = vk::has_extension(gpu->device().physical_device(), VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  const char* setting = std::getenv("KVC_PUSH_DESCRIPTORS");
  const bool turned_off = setting && std::strcmp(setting, "0") == 0;  // CI's run on the pool's route
  CHECK(pushes(gpu->device()) == (offered && !turned_off));

  // A device made with the setting at 0 takes the pool whatever it offers.
  const std::string previous = setting ? setting : "";
  setenv("KVC_PUSH_DESCRIPTORS", "0", 1);
  std::unique_ptr<vk::Device> pool_device = vk::Device::create({});
  if (setting) setenv("KVC_PUSH_DESCRIPTORS", previous.c_str(), 1);
  else unsetenv("KVC_PUSH_DESCRIPTORS");
  CHECK(pool_device->max_push_descriptors() == 0);
  CHECK_FALSE(pushes(*pool_device));
}

}  // namespace kvc
