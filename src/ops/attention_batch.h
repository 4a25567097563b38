// Decode attention over a batch of caches (kvc_attend_batch_device): per entry, one query
// over one cache, exactly as attention() computes it with num_queries = 1. The entries share
// heads, head_dim, dtype and RoPE; each has its own slots (num_slots, slot_stride), its own
// keys_rotated, and its own buffers. On Vulkan the batch runs as one decode dispatch and one
// merge dispatch per group of caches that share keys_rotated and fit the device's descriptor
// limits; where the device cannot index arrays of buffers, one attention() per entry.
#pragma once

#include <vector>

#include "ops/attention.h"

namespace kvc::ops {

// One cache's share: shape.num_queries is 1; args.scores, logits and lse are unset.
struct DecodeEntry {
  AttentionShape shape;
  AttentionArgs args;
};

void attention_batch(Backend& backend, const std::vector<DecodeEntry>& entries);
// Caches one batched dispatch takes on this backend; 0 where attention_batch_vulkan runs one
// attention() per entry instead (the device cannot index buffer arrays, or
// KVC_BATCH_DECODE=per_cache in the environment, read per call so that a test can run both).
uint32_t attention_batch_caches_per_dispatch(Backend& backend);
void attention_batch_cpu(const std::vector<DecodeEntry>& entries);
void attention_batch_vulkan(Backend& backend, const std::vector<DecodeEntry>& entries);

}  // namespace kvc::ops
