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

#include <cstddef>
#include <optional>
#include <vector>

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

// A decode step may leave its eviction for later, when many layers' evictions take one
// dispatch: an engine's step (kvc_step_*) records every layer's decode and then, at its end,
// every layer's eviction, where a dispatch a layer cost each layer its latency (about 3 us on
// the H100, docs/benchmarks.md). On Vulkan, under H2O's and TreeKV's rules scored from the
// decode's logits, the dispatch that merges the decode's splits updates the scores and leaves
// the victim's candidates; evict_deferred then evicts. Nothing may touch the layer in between.
// The pair is decode_evict bit for bit; its CPU reference is decode_evict_cpu (the CPU never defers).
struct DeferredEviction {
  EvictionShape shape;
  EvictionArgs args;
  View candidates;  // what the scoring left: deferred_candidates_bytes(shape)
};

// Bytes of the candidates a deferred step of `eviction` leaves; 0 where `backend` cannot defer
// the step (the CPU; other rules; KVC_SCORED_EVICTION=workgroup in the environment).
size_t deferred_candidates_bytes(const Backend& backend, const EvictionShape& eviction, const EvictionArgs& args);
// decode_evict, returning its eviction (none where the step evicts nothing) for evict_deferred
// instead of recording it, with the candidates in `candidates` (deferred_candidates_bytes > 0).
std::optional<DeferredEviction> decode_evict_deferring(Backend& backend, const AttentionShape& attention,
                                                       const EvictionShape& eviction, const DecodeEvictArgs& args,
                                                       View candidates);
// Records the evictions the steps left (their layers untouched since).
void evict_deferred(Backend& backend, const std::vector<DeferredEviction>& evictions);

}  // namespace kvc::ops
