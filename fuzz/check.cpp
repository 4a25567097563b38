#include "check.h"

#include <cstdio>
#include <cstdlib>

namespace kvc::fuzz {

void report_finding(const char* call, const char* invariant) {
  std::fprintf(stderr, "kvc fuzz finding: %s %s\n", call, invariant);
  std::abort();
}

}  // namespace kvc::fuzz
