// Appending to many caches at once (kvc_cache_append_batch_device): per entry, one chunk into
// one cache layer, exactly as append_rows writes it. The entries share num_kv_heads, head_dim
// and dtype, and those that store keys rotated share their RoPE; each has its own slots,
// positions and buffers. A cache may take two entries (a chunk that wraps a ring), whose slots
// are disjoint, as every two entries' written slots must be. On Vulkan the batch runs as one
// append_rows_batch dispatch per group of entries that fits the device's descriptor limits (a
// group of one, and every entry where the device cannot index arrays of buffers, as
// append_rows).
#pragma once

#include <vector>

#include "ops/append_rows.h"

namespace kvc::ops {

struct AppendEntry {
  AppendRowsShape shape;
  AppendRowsArgs args;
};

void append_rows_batch(Backend& backend, const std::vector<AppendEntry>& entries);
// Entries one append_rows_batch dispatch takes on this backend; 0 where the batch runs
// append_rows per entry (as attention_batch_caches_per_dispatch says for its kernels).
uint32_t append_rows_batch_entries_per_dispatch(Backend& backend);
void append_rows_batch_cpu(const std::vector<AppendEntry>& entries);
void append_rows_batch_vulkan(Backend& backend, const std::vector<AppendEntry>& entries);

}  // namespace kvc::ops
