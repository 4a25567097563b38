// A decode step whose query's own token is appended in the same work (kvc_decode_device): the
// token's K and V rows land as ops::append_rows writes them (`token`: one token at slot
// shape.num_slots - 1 of every kv head, into args' k, v and positions), then attention for that
// one query over the shape.num_slots slots as ops::attention computes it (no scores or
// logits). On Vulkan both happen in one dispatch, attention_decode_append (its splits over the slots
// before the token, one more workgroup per kv head and query-head block for the token), so a
// decode layer records one dispatch and waits at one barrier fewer than append_rows then
// attention.
#pragma once

#include "backend/backend.h"
#include "ops/append_rows_batch.h"
#include "ops/attention.h"

namespace kvc::ops {

void decode_append(Backend& backend, const AttentionShape& shape, const AttentionArgs& args, const AppendEntry& token);
// The reference: append_rows_cpu, then attention_cpu.
void decode_append_cpu(const AttentionShape& shape, const AttentionArgs& args, const AppendEntry& token);
void decode_append_vulkan(Backend& backend, const AttentionShape& shape, const AttentionArgs& args, const AppendEntry& token);

}  // namespace kvc::ops
