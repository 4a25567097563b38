// kvc.h's threading contract on the Vulkan device.
#include <doctest/doctest.h>

#include "support/concurrent_streams.h"

TEST_CASE("two Vulkan contexts driven from two threads at once give their single-threaded results") {
  kvc::test::check_two_contexts_in_two_threads(KVC_BACKEND_VULKAN);
}
