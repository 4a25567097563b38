// kvc_attend_batch_device on the CPU backend: the batch leaves every cache and output as its
// twin fed through kvc_attend_device (the CPU attends cache by cache, so bit for bit), and
// every misuse is refused with nothing changed.
#include <doctest/doctest.h>

#include "support/batch_twins.h"

namespace kvc {

TEST_CASE("kvc_attend_batch_device on the CPU: each cache as its twin through kvc_attend_device") {
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
    for (bool rope : {false, true}) {
      test::BatchOptions options;
      options.dtype = dtype;
      options.rope = rope;
      options.inside_step = rope;
      test::check_batch_twins(KVC_BACKEND_CPU, options, 0.0);
    }
}

TEST_CASE("kvc_attend_batch_device on the CPU refuses misuse and changes nothing") { test::check_batch_misuse(KVC_BACKEND_CPU); }

}  // namespace kvc
