// The run fails on any validation-layer message (docs/reliability.md, "Validation"). This test
// proves it can: it reports one message through VK_EXT_debug_utils' own entry point, as the
// layer reports what it finds, so nothing invalid (no undefined behaviour) is needed. Skipped
// in ordinary runs, since its message must fail the run; CI runs it alone with --no-skip and
// requires the binary to fail and name the message.
#include <doctest/doctest.h>

#include "support/test_support.h"
#include "vulkan/device.h"
#include "vulkan/validation_log.h"

namespace kvc {

TEST_CASE("a planted validation-layer message fails the run" * doctest::skip()) {
  vk::DeviceOptions options;
  options.validation = true;
  std::unique_ptr<vk::Device> device = vk::Device::create(options);
  REQUIRE(device->validating());
  auto submit = reinterpret_cast<PFN_vkSubmitDebugUtilsMessageEXT>(
      vkGetInstanceProcAddr(device->instance(), "vkSubmitDebugUtilsMessageEXT"));
  REQUIRE((submit != nullptr));
  const uint64_t before = vk::validation_messages_in_process();
  VkDebugUtilsMessengerCallbackDataEXT message{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CALLBACK_DATA_EXT};
  message.pMessageIdName = "kvc-planted";
  message.pMessage = "kvc-planted: a message planted by the test of the validation check";
  submit(device->instance(), VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT, VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
         &message);
  CHECK(device->validation_messages() == 1);
  CHECK(vk::validation_messages_in_process() == before + 1);
  CHECK(vk::first_validation_messages().back().find("kvc-planted") != std::string::npos);
}

}  // namespace kvc
