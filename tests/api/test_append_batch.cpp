// kvc_cache_append_batch_device on the CPU backend: every cache of every policy as its twin
// fed through kvc_cache_append_device (the CPU appends cache by cache, so bit for bit), f32
// and f16, with RoPE and without, inside a step and outside, chunks of several tokens and
// single tokens followed by the batched decode; and every misuse refused with nothing changed.
#include <doctest/doctest.h>

#include "support/batch_twins.h"

namespace kvc {

TEST_CASE("kvc_cache_append_batch_device on the CPU: each cache as its twin through kvc_cache_append_device") {
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
    for (bool rope : {false, true}) {
      test::BatchOptions options;
      options.dtype = dtype;
      options.rope = rope;
      options.inside_step = rope;
      options.every_policy = true;
      // FAEDKV's window of 5 and FOURIER's of 6: chunks of 4 wrap them.
      options.step_tokens = 4;
      options.append_batch = true;
      options.attend_batch = false;
      test::check_batch_twins(KVC_BACKEND_CPU, options, 0.0);
    }
}

TEST_CASE("kvc_cache_append_batch_device on the CPU: a decode step's tokens, then kvc_attend_batch_device") {
  test::BatchOptions options;
  options.append_batch = true;
  options.inside_step = true;
  test::check_batch_twins(KVC_BACKEND_CPU, options, 0.0);
}

TEST_CASE("kvc_cache_append_batch_device on the CPU refuses misuse and changes nothing") { test::check_append_batch_misuse(KVC_BACKEND_CPU); }

}  // namespace kvc
