#include "ops/decode_append.h"

#include "common/error.h"

namespace kvc::ops {

void decode_append_cpu(const AttentionShape& shape, const AttentionArgs& args, const AppendEntry& token) {
  append_rows_cpu(token.shape, token.args);
  attention_cpu(shape, args);
}

namespace {

bool same(const View& a, const View& b) { return a.tensor == b.tensor && a.offset == b.offset; }

}  // namespace

void decode_append(Backend& backend, const AttentionShape& shape, const AttentionArgs& args, const AppendEntry& token) {
  require(shape.num_queries == 1 && token.shape.num_tokens == 1 && token.shape.source_token == 0 &&
              token.shape.first_slot + 1 == shape.num_slots && token.shape.slot_stride == shape.slot_stride &&
              token.shape.rope.enabled() == (shape.keys_rotated && shape.rope.enabled()) && same(token.args.k_cache, args.k) &&
              same(token.args.v_cache, args.v) && same(token.args.positions, args.positions),
          KVC_ERROR_INTERNAL, "decode_append: the token is the one query's own, in the attended layer's last slot");
  require(!args.scores && !args.logits && !args.lse, KVC_ERROR_INTERNAL, "decode_append writes no scores or logits");
  if (backend.is_cpu()) decode_append_cpu(shape, args, token);
  else decode_append_vulkan(backend, shape, args, token);
}

}  // namespace kvc::ops
