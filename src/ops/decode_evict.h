// A decode step's attention and the eviction step that follows it on the same layer
// (ops/attention.h with one query, then ops/eviction_step.h), as one op so that a backend may
// run the eviction inside the attention's own dispatches or leave it for later: on Vulkan
// STREAMING's single eviction shares the dispatch that merges flash-decoding's splits (neither
// reads what the other writes), which leaves its decode step as many dispatches and barriers
// as FULL's, where the step is latency-bound (docs/benchmarks.md); H2O's, TOVA's and TreeKV's
// step scores the slots over many workgroups and evicts in one more dispatch, a thread a few slots,
// where eviction_step's one workgroup per kv head would walk them all, and those two
// dispatches may wait for the end of an engine's step (below). Other steps run the two ops in turn.
#pragma once

#include <cstddef>
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

// A decode step may leave its eviction for later, when many layers' take one dispatch: an
// engine's step (kvc_step_*) records every layer's decode and then, at its end, every layer's
// scoring and eviction, where dispatches a layer cost each layer their latency (about 3 us each
// on the H100, docs/benchmarks.md). On Vulkan, under a rule that reads the step's attention
// (H2O, TOVA, TreeKV) scored from the decode's logits and lse, a layer's step is then its
// attention alone, as FULL's is; evict_deferred forms the scores, leaves the victims'
// candidates and evicts. Nothing may touch the layer, its logits or its lse in between. The
// pair is decode_evict bit for bit; its CPU reference is decode_evict_cpu (the CPU never defers).
struct DeferredEviction {
  EvictionShape shape;
  EvictionArgs args;
  View candidates;  // where the scoring leaves them: deferred_candidates_bytes
};

// Bytes of the candidates a step under `rule` over `slots` slots of `num_kv_heads` kv heads leaves (the
// same on every backend, so that what a cache holds does not depend on it).
size_t deferred_candidates_bytes(EvictionRule rule, uint32_t num_kv_heads, uint32_t slots);
// Whether `backend` can defer the step: Vulkan, a rule that reads scores, given as logits and lse.
bool can_defer_eviction(const Backend& backend, const EvictionShape& eviction, const EvictionArgs& args);
// decode_evict's attention (can_defer_eviction must hold), returning the rest (the scoring,
// and the eviction if any) for evict_deferred, its candidates to go in `candidates`.
DeferredEviction decode_evict_deferring(Backend& backend, const AttentionShape& attention, const EvictionShape& eviction,
                                        const DecodeEvictArgs& args, View candidates);
// Records what the steps left (their layers untouched since).
void evict_deferred(Backend& backend, const std::vector<DeferredEviction>& evictions);

}  // namespace kvc::ops
