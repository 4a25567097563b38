// main() of the Vulkan test binary: without a Vulkan device the suite is skipped visibly
// (exit 77, which ctest reports as "Skipped"), unless KVC_REQUIRE_GPU=1 makes it a failure.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "support/test_support.h"
#include "vulkan/device.h"

int main(int argc, char** argv) {
  kvc::Backend* backend = kvc::test::vulkan_backend();
  const char* require_gpu = std::getenv("KVC_REQUIRE_GPU");
  if (!backend) {
    const bool required = require_gpu && std::strcmp(require_gpu, "0") != 0;
    std::printf("[kvc tests] SKIPPED: no Vulkan device%s\n", required ? ", but KVC_REQUIRE_GPU is set: failing" : "");
    return required ? 1 : 77;
  }
  std::printf("[kvc tests] Vulkan device: %s\n", backend->device_name().c_str());
  kvc::test::seed();
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (kvc::test::validation_messages() != 0) {
    std::printf("[kvc tests] FAILED: %u validation-layer messages; last: %s\n", kvc::test::validation_messages(),
                kvc::test::last_validation_message().c_str());
    return 1;
  }
  return result;
}
