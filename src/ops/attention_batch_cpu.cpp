// The reference: each entry's single-cache attention.
#include "ops/attention_batch.h"

namespace kvc::ops {

void attention_batch_cpu(const std::vector<DecodeEntry>& entries) {
  for (const DecodeEntry& entry : entries) attention_cpu(entry.shape, entry.args);
}

void attention_batch(Backend& backend, const std::vector<DecodeEntry>& entries) {
  if (entries.empty()) return;
  const AttentionShape& first = entries.front().shape;
  for (const DecodeEntry& entry : entries) {
    const AttentionShape& shape = entry.shape;
    require(shape.num_queries == 1 && shape.num_q_heads == first.num_q_heads && shape.num_kv_heads == first.num_kv_heads &&
                shape.head_dim == first.head_dim && shape.dtype == first.dtype && shape.rope == first.rope &&
                !entry.args.scores && !entry.args.logits && !entry.args.lse,
            KVC_ERROR_INTERNAL, "attention_batch: entries of one query each, sharing their shape, without scores");
  }
  if (backend.is_cpu()) attention_batch_cpu(entries);
  else attention_batch_vulkan(backend, entries);
}

}  // namespace kvc::ops
