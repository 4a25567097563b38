// A policy decides what a cache keeps: how many slots each layer allocates, which position
// each new token's slot carries, and what happens after attention (evict, compress). It
// works through ops on the cache's tensors, never through raw Vulkan.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "cache/cache_config.h"

namespace kvc {

class Cache;

// A step's attention scores as a policy that needs them receives them: per kv head and slot
// probabilities (a chunk, or a call that asked for scores). A decode step of a policy that
// takes_decode_logits() comes without them: the policy keeps the decode's logits and
// log-sum-exps and forms the probabilities itself, a dispatch fewer per layer.
struct StepScores {
  View probabilities;  // f32 [num_kv_heads][slots attended]
};

// Where an append's tokens land: token i at first_slot + i, and from token wrap_after on at
// wrap_slot + (i - wrap_after) (a ring of slots that wraps within the append).
struct AppendPlacement {
  uint32_t first_slot = 0;
  uint32_t wrap_after = UINT32_MAX;
  uint32_t wrap_slot = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;

  // A copy of the policy's state, for a transaction to put back (Cache::save): host fields are
  // copied, device tensors shared (work that never ran left them as they were).
  virtual std::unique_ptr<Policy> clone() const = 0;

  // Slots each layer allocates (the most it ever holds, transient slots included).
  virtual uint32_t slots_allocated() const = 0;

  // Throws Error (KVC_ERROR_CAPACITY, ...) when `layer` cannot take n_tokens more now.
  // Runs before anything changes, so a refused append leaves the cache as it was.
  virtual void check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const = 0;

  // The position the appended token that lands in `slot` carries (RoPE reads it); the tokens
  // after it in the same append carry the next positions, one each.
  virtual int32_t position_for_slot(const Cache& cache, uint32_t layer, uint32_t slot, uint64_t token_index) const = 0;

  // Where the n_tokens of an append land (checked by check_append): by default after the
  // slots held. A policy that reuses slots records here what it keeps of their contents
  // first (FAEDKV folds the window's oldest tokens into its spectrum), changing nothing else.
  virtual AppendPlacement place_append(Cache& cache, uint32_t layer, uint32_t n_tokens);
  // The append placed by place_append is recorded: bookkeeping that follows it changes here,
  // so an append that fails while recording leaves the policy as it was.
  virtual void appended(Cache& cache, uint32_t layer, uint32_t n_tokens) { (void)cache, (void)layer, (void)n_tokens; }

  // Called once by the Cache after its storage exists: device state the policy owns (tables,
  // scratch) is allocated here, so that nothing is built on the decode path.
  virtual void allocate_device_state(Backend& backend) { (void)backend; }

  // Throws (before anything changes) when the policy cannot serve an attend of n_queries of
  // `layer` now, with scores or without: what Cache::check_attend cannot know.
  virtual void check_attend(const Cache& cache, uint32_t layer, uint32_t n_queries, bool with_scores) const {
    (void)cache, (void)layer, (void)n_queries, (void)with_scores;
  }

  // Attention the policy records itself (FAEDKV over its spectral segment; an eviction policy's
  // decode step with its eviction, ops/decode_evict.h), where `scores` receive the step's
  // scores as the cache arranged them for after_attend: records it and returns true; false
  // leaves it to plain attention over the slots held. Throws before recording anything when it
  // cannot serve the call.
  virtual bool record_attention(Cache& cache, uint32_t layer, uint32_t n_queries, View q, View out, const StepScores& scores) {
    (void)cache, (void)layer, (void)n_queries, (void)q, (void)out, (void)scores;
    return false;
  }
  // Whether record_attention computes attention other than over the slots held: such a cache
  // attends on its own in a batched decode (kvc_attend_batch_device) too.
  virtual bool attends_itself() const { return false; }
  // Whether a decode token's append may be written by its attention's own work
  // (kvc_decode_device, ops/decode_append.h): its appends land after the slots held and record
  // nothing else, appended() records nothing, and record_attention leaves one query to the
  // plain op (its work after the attention may read the token).
  virtual bool appends_inside_decode() const { return false; }

  // Slots kvc_cache_read returns for `layer`: by default those held.
  virtual uint32_t read_slots(const Cache& cache, uint32_t layer) const;
  // Reads `layer` as attention sees it when the policy holds part of it in another form
  // (outputs as kvc_cache_read documents, read_slots() per kv head, any may be null) and
  // returns true; false reads the storage as it is.
  virtual bool read(Cache& cache, uint32_t layer, void* k, void* v, int32_t* positions) {
    (void)cache, (void)layer, (void)k, (void)v, (void)positions;
    return false;
  }

  // Whether every stored slot keeps the position it got when appended, for as long as the
  // cache holds it (nothing is renumbered or rebuilt): the cache may then store keys rotated.
  virtual bool keeps_positions() const { return false; }
  // Whether after_attend needs the attention scores.
  virtual bool needs_scores() const { return false; }
  // Whether a decode step with no scores asked for reaches the policy without probabilities
  // (StepScores): its record_attention records the step from the decode's logits, which it keeps.
  virtual bool takes_decode_logits() const { return false; }

  // Called inside the attend submission, after attention was recorded; `scores` holds the
  // step's scores when needs_scores(). May record ops that evict or compress.
  virtual void after_attend(Cache& cache, uint32_t layer, const StepScores& scores) {
    (void)cache, (void)layer, (void)scores;
  }

  // Work the policy left for the end of the step (Cache::leave_for_step_end) on `layer`,
  // recorded now: the cache calls it before it records anything else on the layer.
  virtual void settle(Cache& cache, uint32_t layer) { (void)cache, (void)layer; }
  // All the work it left, every layer's together (the step's end, or an op on every layer).
  virtual void settle_all(Cache& cache) { (void)cache; }

  // Called inside the attend submission after after_attend, with its queries (on the backend,
  // the cache dtype, [n_queries][num_q_heads][head_dim], before RoPE): the newest n_queries
  // tokens' queries. Work that keeps them is recorded, not run.
  virtual void observe_queries(Cache& cache, uint32_t layer, View q, uint32_t n_queries) {
    (void)cache, (void)layer, (void)q, (void)n_queries;
  }

  // The application ended the prompt (kvc_cache_end_prefill), inside a submission: policies
  // that select once per prompt (SnapKV, PyramidKV, HitKV) record it here. Throws before
  // changing anything.
  virtual void end_prefill(Cache& cache) { (void)cache; }

  // Device bytes of the policy's own state (scores, kept queries, spare storage).
  virtual size_t device_bytes_held() const { return 0; }

  // Called when the cache forgets every token (kvc_cache_reset): drop host-side step state.
  virtual void on_reset() {}
};

// The policy named by config.policy, with its parameters validated (throws Error).
std::unique_ptr<Policy> make_policy(const CacheConfig& config);

}  // namespace kvc
