// The row families kvc-bench prints; each lives in its own rows_<family>.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "common/dtype.h"
#include "ops/attention.h"

namespace kvc::bench {

// A tensor of `bytes` holding random values of `dtype` in [-1, 1] (timings must not see zeros).
std::unique_ptr<Tensor> make_random(Backend& backend, size_t bytes, Dtype dtype);

// Which rows to time: --quick shrinks every shape (lavapipe, smoke runs); --only keeps the rows
// whose name contains one of the given strings, or, for the engine rows, whose "name shape"
// does ("engine_decode faedkv": one policy's rows; a device session times just what changed).
struct RowOptions {
  bool quick = false;
  std::vector<std::string> only;

  bool wants(const std::string& row_name) const {
    if (only.empty()) return true;
    for (const std::string& part : only)
      if (row_name.find(part) != std::string::npos || part.rfind(row_name + " ", 0) == 0) return true;
    return false;
  }
  bool wants(const std::string& row_name, const std::string& shape) const {
    if (only.empty()) return true;
    for (const std::string& part : only)
      if (row_name.find(part) != std::string::npos || (row_name + " " + shape).find(part) != std::string::npos) return true;
    return false;
  }
};

// An attention op's operands on the backend: random Q, K and V of `shape` (its slot stride),
// each kv head's slots at positions 0, 1, 2, ... with RoPE, and an output.
struct AttentionBuffers {
  std::unique_ptr<Tensor> q, k, v, positions, turn_table, out;
  ops::AttentionArgs args() const;
};
AttentionBuffers allocate_attention(Backend& backend, const ops::AttentionShape& shape);
// What attention over `shape` must move: K and V of its slots once, Q in and O out.
double attention_bytes(const ops::AttentionShape& shape);

void add_attention_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report);
void add_decode_batch_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report);
void add_policy_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report);
void add_fourier_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report);
// Through the public C API on a context of its own (Vulkan), timed on the wall clock.
void add_engine_rows(const Timing& timing, const RowOptions& options, Report& report);

}  // namespace kvc::bench
