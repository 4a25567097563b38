// main() of the CPU test binary.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/test_support.h"

int main(int argc, char** argv) {
  kvc::test::seed();
  doctest::Context context(argc, argv);
  return context.run();
}
