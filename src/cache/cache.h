// A KV cache on one backend: per layer, K and V as [num_kv_heads][slot_stride][head_dim] and an
// int32 position per slot, under a policy. Every public method validates everything first
// (the device paths: their caller runs check_append, check_attend or check_decode), so a call that throws
// leaves the cache unchanged. Appends and attends take their tensors from
// the host (staged through the backend) or from tensors already on the backend; either way
// their work is recorded in the backend's current operation, so a step holds many of them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "cache/cache_config.h"
#include "cache/layer_storage.h"
#include "ops/append_rows_batch.h"
#include "ops/attention.h"
#include "ops/attention_batch.h"
#include "policies/policy.h"

namespace kvc {

struct LayerState {
  // Shared with the state a transaction saved (Backend::enlist), never with another cache.
  std::shared_ptr<Tensor> k;          // [num_kv_heads][slot_stride][head_dim], before RoPE unless keys_rotated()
  std::shared_ptr<Tensor> v;          // [num_kv_heads][slot_stride][head_dim]
  std::shared_ptr<Tensor> positions;  // int32 [num_kv_heads][slot_stride]
  uint32_t slot_stride = 0;           // slots allocated per kv head (fewer once compacted)
  uint32_t slots_held = 0;            // the same for every kv head
  uint32_t last_append = 0;           // tokens of the latest append: the queries attend may take
  uint32_t last_queries = 0;          // queries of the latest attend (what its scores sum over)
  uint64_t tokens_seen = 0;           // tokens appended so far
};

class Cache : public Participant, public StepEndWork {
 public:
  Cache(Backend& backend, const CacheConfig& config);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // Throw unless `layer` can take an append of n_tokens (or an attend of n_queries) now: the
  // checks that need no data (layer, counts, capacity, size limits), run before any input is read.
  void check_append(uint32_t layer, uint32_t n_tokens) const;
  void check_attend(uint32_t layer, uint32_t n_queries, bool with_scores) const;

  // Host data in the cache dtype, laid out as kvc.h documents; checked for NaN and Inf after
  // check_append (check_attend), so a refused size never reads past what the caller holds.
  void append_host(uint32_t layer, uint32_t n_tokens, const void* k, const void* v);
  void attend_host(uint32_t layer, uint32_t n_queries, const void* q, void* out, float* scores);
  // The same with tensors on this cache's backend: the caller ran check_append (check_attend)
  // first, and then checked the views' extent, which needs the sizes those checks bound.
  void append_device(uint32_t layer, uint32_t n_tokens, View k, View v);
  void attend_device(uint32_t layer, uint32_t n_queries, View q, View out, View scores);
  // One decode token (kvc_decode_device): append_device of its K and V, then attend_device of
  // its query without scores, in one operation; the token is written by the attention's own
  // work where the policy allows it (Policy::appends_inside_decode). The caller ran
  // check_decode, then checked the views' extent.
  void check_decode(uint32_t layer) const;
  void decode_device(uint32_t layer, View k, View v, View q, View out);
  // Batched decode (cache/attend_batch.h), inside an operation the caller began: the cache
  // joins it (enlist), then either its decode runs in the batch's kernel (batchable: the
  // policy's attention is the plain op and it needs no scores) and finish_batched_decode does
  // the rest of attend_device's work, or record_decode does all of it on its own.
  void enlist() { backend_.enlist(*this); }
  bool batchable(View scores) const;
  ops::DecodeEntry decode_entry(uint32_t layer, View q, View out);
  void finish_batched_decode(uint32_t layer, View q);
  void record_decode(uint32_t layer, View q, View out, View scores);
  // Batched append (cache/append_batch.h), inside an operation the cache joined (enlist):
  // plan_append records what the policy does before the chunk lands (FAEDKV and FOURIER fold
  // the window's oldest tokens) and returns the chunk's row appends, two where it wraps a ring
  // (disjoint slots); once they are recorded, finish_append does the bookkeeping. An append
  // on its own (record_append) is the same three steps.
  std::vector<ops::AppendEntry> plan_append(uint32_t layer, uint32_t n_tokens, View k, View v);
  void finish_append(uint32_t layer, uint32_t n_tokens, const std::vector<ops::AppendEntry>& rows);
  void read(uint32_t layer, uint32_t max_slots, void* k, void* v, int32_t* positions);
  void reset();
  // Tells the policy the prompt is complete (kvc_cache_end_prefill).
  void end_prefill();

  const CacheConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  Policy& policy() const { return *policy_; }
  LayerState& layer(uint32_t index) { return layers_[index]; }
  const LayerState& layer(uint32_t index) const { return layers_[index]; }
  // Gives `layer` new storage of `slot_stride` slots per kv head (at creation, at a reset, or a
  // policy's compaction into it); the old storage lives on while recorded work still reads it.
  void replace_storage(uint32_t layer, LayerStorage storage, uint32_t slot_stride);
  // The shape of attention by n_queries newest tokens over everything `layer` holds.
  ops::AttentionShape attention_shape(uint32_t layer, uint32_t n_queries) const;
  // The running attend call's Q on the backend: [n_queries][num_q_heads][head_dim].
  View attend_queries() const { return attend_queries_; }
  View turn_table() const { return rope_turns_ ? View{rope_turns_.get(), 0} : View{}; }
  // Whether keys are stored rotated to their positions as they arrive (RoPE on and a policy
  // whose positions never change): attention then reads them as stored, as an engine's cache
  // does, and kvc_cache_read rotates them back.
  bool keys_rotated() const { return config_.rope.enabled() && policy_->keeps_positions(); }
  // The policy left work on the device for the open step's end (Policy::settle_all),
  // where many layers' take one dispatch.
  void leave_for_step_end() { backend_.leave_for_step_end(*this); }
  void record_step_end() override { policy_->settle_all(*this); }
  size_t bytes_per_slot() const;
  size_t device_bytes_held() const;
  uint64_t compressions() const { return compressions_; }
  void count_compression() { ++compressions_; }

  // Participant: the layers' bookkeeping and storage, the policy's state, the compression
  // count and the host path's tensors, which is all an append, attend or end of prompt changes
  // on the host.
  void save() override;
  void restore() override;
  void forget_saved() override { saved_.reset(); }

 private:
  struct SavedState {
    std::vector<LayerState> layers;
    std::unique_ptr<Policy> policy;
    uint64_t compressions = 0;
    std::shared_ptr<Tensor> query_input, attend_output, attend_scores;
  };
  // backend_.begin(), joining the operation (or step) as a participant.
  void begin_change();
  void check_layer(uint32_t layer) const;
  // check_attend's checks of the queries themselves and the policy's, not of the last append.
  void check_queries(uint32_t layer, uint32_t n_queries, bool with_scores) const;
  // Records the scatter of a chunk into `layer` and its bookkeeping (plan_append, the rows,
  // finish_append).
  void record_append(uint32_t layer, uint32_t n_tokens, View k, View v);
  // Records attention; returns the scores the policy reads: `scores`, or when the policy needs
  // them and the caller asked for none the cache's own probabilities (none for a decode step of
  // a policy that keeps the decode's logits itself: Policy::takes_decode_logits). With `token`
  // (decode_device) the query's own token, planned but not yet recorded, is written by the
  // attention's work (ops::decode_append).
  StepScores record_attention(uint32_t layer, uint32_t n_queries, View q, View out, View scores, const ops::AppendEntry* token = nullptr);
  // The policy's part of an attend, recorded after attention and any read-back of its scores.
  void finish_attend(uint32_t layer, uint32_t n_queries, View q, const StepScores& scores);

  Backend& backend_;
  CacheConfig config_;
  std::unique_ptr<Policy> policy_;
  std::vector<LayerState> layers_;
  std::unique_ptr<Tensor> rope_turns_;
  // Grown on demand, and saved with the state: a failed call leaves the memory held as it was.
  std::shared_ptr<Tensor> query_input_;   // the host path's Q, staged
  std::shared_ptr<Tensor> attend_output_; // the host path's output, then read back
  std::shared_ptr<Tensor> attend_scores_;
  View attend_queries_;
  uint64_t compressions_ = 0;
  std::unique_ptr<SavedState> saved_;
};

}  // namespace kvc
