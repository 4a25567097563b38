// The batched calls (kvc_cache_append_batch_device, kvc_attend_batch_device) against their
// per-cache calls, for the API tests on the CPU and on Vulkan: a batch of caches of mixed
// policies and lengths, each with a twin in the same context fed the same tokens, one decode
// step at a time through the batch and through the twins; and each batched call's misuse cases.
#pragma once

#include <string>
#include <vector>

#include "kvc/kvc.h"
#include "support/api_helpers.h"
#include "support/engine_paths.h"

namespace kvc::test {

struct BatchOptions {
  kvc_dtype dtype = KVC_DTYPE_F32;
  bool rope = true;          // NeoX on every cache (FAEDKV and FOURIER, whose keys are stored as they come, only without)
  bool inside_step = false;  // each decode step's calls inside kvc_step_begin / kvc_step_end
  bool per_cache = false;    // KVC_BATCH_DECODE=per_cache: no batched kernels
  uint32_t copies = 1;       // of every member: a larger batch
  uint32_t decode_steps = 3;
  // The members: FULL at lengths from 1 token to past a thousand beside the eviction policies
  // that decode on the batched kernels or on their own, or every policy_cases() stream.
  bool every_policy = false;
  uint32_t step_tokens = 1;    // each decode step's chunk; its newest token's query attends
  bool append_batch = false;   // the chunks through kvc_cache_append_batch_device (else kvc_cache_append)
  bool attend_batch = true;    // the queries through kvc_attend_batch_device (else kvc_attend_device)
};

// Runs the decode steps and checks, after each, every cache against its twin, which appends
// each chunk through kvc_cache_append_device and attends through kvc_attend_device: K, V,
// positions and stats bit for bit; outputs (and the scores asked of one cache) bit for bit
// where the cache attends on its own, within `batched_tolerance` of the output scale where it
// shares the batched decode kernels (their splits differ from one cache's, so the sums' order
// does).
void check_batch_twins(kvc_backend backend, const BatchOptions& options, double batched_tolerance);

// Every misuse the header lists for kvc_attend_batch_device (kvc_cache_append_batch_device),
// each refused with its status and a message naming it, and no cache changed.
void check_batch_misuse(kvc_backend backend);
void check_append_batch_misuse(kvc_backend backend);

}  // namespace kvc::test
