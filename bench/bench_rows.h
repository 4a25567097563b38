// The row families kvc-bench prints; each lives in its own rows_<family>.cpp.
#pragma once

#include <memory>

#include "bench_harness.h"
#include "common/dtype.h"

namespace kvc::bench {

// A tensor of `bytes` holding random values of `dtype` in [-1, 1] (timings must not see zeros).
std::unique_ptr<Tensor> make_random(Backend& backend, size_t bytes, Dtype dtype);

void add_attention_rows(Backend& backend, const Timing& timing, bool quick, Report& report);
void add_policy_rows(Backend& backend, const Timing& timing, bool quick, Report& report);

}  // namespace kvc::bench
