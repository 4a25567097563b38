// kvc_cache_append_batch_device on Vulkan: a batch of every policy (FAEDKV and FOURIER without
// RoPE) leaves each cache as its twin fed through kvc_cache_append_device, bit for bit, K, V,
// positions, stats and outputs; chunks of 4 tokens (which wrap FAEDKV's and FOURIER's windows)
// and single tokens, f32 and f16, with and without RoPE, inside a step and outside, batches of
// more caches than one dispatch group takes (lavapipe: 6 chunks a group), the per-cache
// fallback (KVC_BATCH_DECODE=per_cache), and the engine's decode step: the batched append,
// then kvc_attend_batch_device.
#include <doctest/doctest.h>

#include "support/batch_twins.h"

namespace kvc {
namespace {

// As test_attend_batch_vulkan.cpp's: where the batched decode kernels ran, f32 sums in f32
// (1e-5 of the output scale), f16 rounds the output to f16 on both sides (2^-11 each).
double tolerance(kvc_dtype dtype) { return dtype == KVC_DTYPE_F32 ? 1e-5 : 2e-3; }

test::BatchOptions every_policy_chunks(kvc_dtype dtype, bool rope) {
  test::BatchOptions options;
  options.dtype = dtype;
  options.rope = rope;
  options.every_policy = true;
  options.step_tokens = 4;  // FAEDKV's window of 5 and FOURIER's of 6: chunks of 4 wrap them
  options.append_batch = true;
  options.attend_batch = false;
  return options;
}

}  // namespace

TEST_CASE("kvc_cache_append_batch_device on Vulkan: each cache as its twin through kvc_cache_append_device") {
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
    for (bool rope : {false, true}) {
      test::BatchOptions options = every_policy_chunks(dtype, rope);
      options.inside_step = dtype == KVC_DTYPE_F16;
      test::check_batch_twins(KVC_BACKEND_VULKAN, options, 0.0);
    }
}

TEST_CASE("kvc_cache_append_batch_device on Vulkan: several dispatch groups, and the per-cache fallback") {
  test::BatchOptions options = every_policy_chunks(KVC_DTYPE_F16, true);
  options.copies = 2;  // 24 caches: four groups of 6 chunks on lavapipe
  options.decode_steps = 2;
  test::check_batch_twins(KVC_BACKEND_VULKAN, options, 0.0);
  options.copies = 1;
  options.per_cache = true;
  test::check_batch_twins(KVC_BACKEND_VULKAN, options, 0.0);
}

TEST_CASE("kvc_cache_append_batch_device on Vulkan: a decode step's tokens, then kvc_attend_batch_device") {
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
    test::BatchOptions options;
    options.dtype = dtype;
    options.append_batch = true;
    options.inside_step = dtype == KVC_DTYPE_F32;
    test::check_batch_twins(KVC_BACKEND_VULKAN, options, tolerance(dtype));
  }
}

TEST_CASE("kvc_cache_append_batch_device on Vulkan refuses misuse and changes nothing") {
  test::check_append_batch_misuse(KVC_BACKEND_VULKAN);
}

}  // namespace kvc
