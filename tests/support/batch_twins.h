// kvc_attend_batch_device against kvc_attend_device, for the API tests on the CPU and on
// Vulkan: a batch of caches of mixed policies and lengths, each with a twin in the same
// context fed the same tokens, one decode step at a time through the batch and through the
// twins; and the batch's misuse cases.
#pragma once

#include <string>
#include <vector>

#include "kvc/kvc.h"
#include "support/api_helpers.h"
#include "support/engine_paths.h"

namespace kvc::test {

struct BatchOptions {
  kvc_dtype dtype = KVC_DTYPE_F32;
  bool rope = true;          // NeoX on every cache (FAEDKV, whose keys are stored as they come, only without)
  bool inside_step = false;  // each decode step's calls inside kvc_step_begin / kvc_step_end
  bool per_cache = false;    // KVC_BATCH_DECODE=per_cache: no batched kernels
  uint32_t copies = 1;       // of every member: a larger batch
  uint32_t decode_steps = 3;
};

// Runs the decode steps and checks, after each, every cache against its twin: K, V, positions
// and stats bit for bit; outputs (and the scores asked of one cache) bit for bit where the
// cache attends on its own, within `batched_tolerance` of the output scale where it shares the
// batched kernels (their splits differ from one cache's, so the sums' order does).
void check_batch_twins(kvc_backend backend, const BatchOptions& options, double batched_tolerance);

// Every misuse the header lists, each refused with its status and a message naming it, and
// no cache changed.
void check_batch_misuse(kvc_backend backend);

}  // namespace kvc::test
