// A decode step's attention and the eviction step that follows it on the same layer
// (ops/attention.h with one query, then ops/eviction_step.h), as one op so that a backend may
// run the eviction inside the attention's own dispatches: on Vulkan STREAMING's single
// eviction shares the dispatch that merges flash-decoding's splits (neither reads what the
// other writes), which leaves its decode step as many dispatches and barriers as FULL's, where
// the step is latency-bound (docs/benchmarks.md); past 4096 slots H2O's and TreeKV's step
// scores the slots in the merge's dispatch (each block of slots forms the log-sum-exps it needs
// from the splits) and evicts in one more, a thread a slot, where eviction_step's one
// workgroup per kv head would walk them all. Other steps run the two ops in turn.
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
