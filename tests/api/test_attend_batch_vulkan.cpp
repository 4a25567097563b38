// kvc_attend_batch_device on Vulkan: a batch of FULL, STREAMING, H2O, TOVA (and without RoPE
// FAEDKV) caches of lengths from 2 to past a thousand leaves every cache as its twin fed
// through kvc_attend_device, bit for bit, with outputs within the decode tolerance where the
// batched kernels ran; f32 and f16, with and without RoPE, inside a step and outside, a batch
// of several dispatch groups, and the per-cache fallback (KVC_BATCH_DECODE=per_cache).
#include <doctest/doctest.h>

#include "support/batch_twins.h"

namespace kvc {

// As the decode attention tests': f32 sums in f32 (1e-5 of the output scale), f16 rounds the
// output to f16 on both sides (2^-11 each).
double tolerance(kvc_dtype dtype) { return dtype == KVC_DTYPE_F32 ? 1e-5 : 2e-3; }

TEST_CASE("kvc_attend_batch_device on Vulkan: each cache as its twin through kvc_attend_device") {
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
    for (bool rope : {false, true}) {
      test::BatchOptions options;
      options.dtype = dtype;
      options.rope = rope;
      options.inside_step = dtype == KVC_DTYPE_F16;
      test::check_batch_twins(KVC_BACKEND_VULKAN, options, tolerance(dtype));
    }
}

TEST_CASE("kvc_attend_batch_device on Vulkan: a batch of several dispatch groups, and the per-cache fallback") {
  test::BatchOptions options;
  options.copies = 3;  // 18 caches: on lavapipe (7 caches a dispatch) several groups per kernel
  options.decode_steps = 2;
  test::check_batch_twins(KVC_BACKEND_VULKAN, options, tolerance(options.dtype));
  options.copies = 1;
  options.per_cache = true;
  test::check_batch_twins(KVC_BACKEND_VULKAN, options, 0.0);
}

TEST_CASE("kvc_attend_batch_device on Vulkan refuses misuse and changes nothing") { test::check_batch_misuse(KVC_BACKEND_VULKAN); }

}  // namespace kvc
