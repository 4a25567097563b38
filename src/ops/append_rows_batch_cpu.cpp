// The reference: each entry's append_rows.
#include "ops/append_rows_batch.h"

namespace kvc::ops {

void append_rows_batch_cpu(const std::vector<AppendEntry>& entries) {
  for (const AppendEntry& entry : entries) append_rows_cpu(entry.shape, entry.args);
}

void append_rows_batch(Backend& backend, const std::vector<AppendEntry>& entries) {
  if (entries.empty()) return;
  const AppendRowsShape& first = entries.front().shape;
  const RopeParams* rotated = nullptr;  // the RoPE of the first entry that stores keys rotated
  for (const AppendEntry& entry : entries) {
    const AppendRowsShape& shape = entry.shape;
    if (!rotated && shape.rope.enabled()) rotated = &shape.rope;
    require(shape.num_kv_heads == first.num_kv_heads && shape.head_dim == first.head_dim && shape.dtype == first.dtype &&
                (!shape.rope.enabled() || shape.rope == *rotated),
            KVC_ERROR_INTERNAL, "append_rows_batch: entries sharing heads, head_dim, dtype and the rotated keys' RoPE");
  }
  if (backend.is_cpu()) append_rows_batch_cpu(entries);
  else append_rows_batch_vulkan(backend, entries);
}

}  // namespace kvc::ops
