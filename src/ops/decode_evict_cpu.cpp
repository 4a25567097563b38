// The reference: attention, then the eviction step, as two ops.
#include "ops/decode_evict.h"

namespace kvc::ops {

namespace {

bool same(const View& a, const View& b) { return a.tensor == b.tensor && a.offset == b.offset; }

}  // namespace

void check_decode_evict(const AttentionShape& attention, const EvictionShape& eviction, const DecodeEvictArgs& args) {
  const AttentionArgs& a = args.attention;
  const EvictionArgs& e = args.eviction;
  const bool logits_shared = !e.logits || (same(e.logits, a.logits) && same(e.lse, a.lse));
  require(attention.num_queries == 1 && !a.scores && !a.logits == !a.lse && attention.num_slots == eviction.slots_held &&
              attention.slot_stride == eviction.slot_stride && attention.num_kv_heads == eviction.num_kv_heads &&
              attention.num_q_heads == eviction.num_q_heads && attention.head_dim == eviction.head_dim &&
              attention.dtype == eviction.dtype && same(a.k, e.k) && same(a.v, e.v) && same(a.positions, e.positions) &&
              logits_shared,
          KVC_ERROR_INTERNAL, "decode_evict: the eviction is not the decode's layer after it");
}

void decode_evict_cpu(const AttentionShape& attention, const EvictionShape& eviction, const DecodeEvictArgs& args) {
  attention_cpu(attention, args.attention);
  eviction_step_cpu(eviction, args.eviction);
}

void decode_evict(Backend& backend, const AttentionShape& attention, const EvictionShape& eviction, const DecodeEvictArgs& args) {
  check_decode_evict(attention, eviction, args);
  if (backend.is_cpu()) decode_evict_cpu(attention, eviction, args);
  else decode_evict_vulkan(backend, attention, eviction, args);
}

}  // namespace kvc::ops
