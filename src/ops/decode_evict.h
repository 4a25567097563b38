// A decode step's attention and the eviction step that follows it on the same layer
// (ops/attention.h with one query, then ops/eviction_step.h), as one op so that a backend may
// run the eviction inside the attention's own dispatches: on Vulkan STREAMING's single
// eviction shares the dispatch that merges flash-decoding's splits (neither reads what the
// other writes), which leaves its decode step as many dispatches and barriers as FULL's, where
// the step is latency-bound (docs/benchmarks.md). Other steps run the two ops in turn: the
// rules that read the step's scores need the merge's log-sum-exps first, and made in the
// merge's dispatch by the last of each kv head's workgroups they measured no faster.
#pragma once

#include "backend/backend.h"
#include "ops/attention.h"
#include "ops/eviction_step.h"

namespace kvc::ops {

struct DecodeEvictArgs {
  AttentionArgs attention;  // num_queries 1; no scores (the eviction's come as logits and lse)
  EvictionArgs eviction;    // the same k, v and positions; logits and lse, where given, attention's
};

// Throws Error (KVC_ERROR_INTERNAL) unless the eviction is the attention's layer after it:
// the same storage, slots and heads.
void check_decode_evict(const AttentionShape& attention, const EvictionShape& eviction, const DecodeEvictArgs& args);

void decode_evict(Backend& backend, const AttentionShape& attention, const EvictionShape& eviction, const DecodeEvictArgs& args);
void decode_evict_cpu(const AttentionShape& attention, const EvictionShape& eviction, const DecodeEvictArgs& args);
void decode_evict_vulkan(Backend& backend, const AttentionShape& attention, const EvictionShape& eviction,
                         const DecodeEvictArgs& args);

}  // namespace kvc::ops
