// main() of the Vulkan test binary: without a Vulkan device the suite is skipped visibly
// (exit 77, which ctest reports as "Skipped"), unless KVC_REQUIRE_GPU=1 makes it a failure.
// Any validation-layer message from any device of the run fails it (docs/reliability.md): each
// test case that saw some is named as it ends, and the first messages are printed at the end.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "support/test_support.h"
#include "vulkan/device.h"
#include "vulkan/validation_log.h"

namespace {

// Names the test cases during which the validation layer reported something; a doctest
// listener runs beside whichever reporter is chosen.
class ValidationListener : public doctest::IReporter {
 public:
  explicit ValidationListener(const doctest::ContextOptions&) {}
  void test_case_start(const doctest::TestCaseData& test) override {
    test_ = &test;  // doctest: safe to keep until the test case ends
    at_start_ = kvc::vk::validation_messages_in_process();
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    const uint64_t reported = kvc::vk::validation_messages_in_process() - at_start_;
    if (reported != 0)
      std::printf("[kvc tests] %llu validation-layer messages during \"%s\"\n", static_cast<unsigned long long>(reported),
                  test_->m_name);
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  const doctest::TestCaseData* test_ = nullptr;
  uint64_t at_start_ = 0;
};

}  // namespace

REGISTER_LISTENER("kvc-validation", 1, ValidationListener);

int main(int argc, char** argv) {
  kvc::Backend* backend = kvc::test::vulkan_backend();
  const char* require_gpu = std::getenv("KVC_REQUIRE_GPU");
  if (!backend) {
    const bool required = require_gpu && std::strcmp(require_gpu, "0") != 0;
    std::printf("[kvc tests] SKIPPED: no Vulkan device%s\n", required ? ", but KVC_REQUIRE_GPU is set: failing" : "");
    return required ? 1 : 77;
  }
  std::printf("[kvc tests] Vulkan device: %s, validation layer %s\n", backend->device_name().c_str(),
              backend->device().validating() ? "on (any message fails the run)" : "off");
  kvc::test::seed();
  doctest::Context context(argc, argv);
  const int result = context.run();
  kvc::test::destroy_vulkan_backend();  // what destroying the shared device reports counts too
  const uint64_t messages = kvc::vk::validation_messages_in_process();
  if (messages != 0) {
    std::printf("[kvc tests] FAILED: %llu validation-layer messages; the first:\n", static_cast<unsigned long long>(messages));
    for (const std::string& message : kvc::vk::first_validation_messages()) std::printf("  %s\n", message.c_str());
    return 1;
  }
  return result;
}
