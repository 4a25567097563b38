#include "cache/attend_batch.h"

#include "ops/attention_batch.h"

namespace kvc {

void attend_batch_device(Backend& backend, uint32_t layer, const std::vector<DecodeCall>& calls) {
  backend.begin();
  for (const DecodeCall& call : calls) call.cache->enlist();
  std::vector<ops::DecodeEntry> entries;
  for (const DecodeCall& call : calls)
    if (call.cache->batchable(call.scores)) entries.push_back(call.cache->decode_entry(layer, call.q, call.out));
  ops::attention_batch(backend, entries);
  // The batched kernel reads every batched cache before any of their policies evicts or
  // compresses; a cache on its own path attends and then runs its policy, as alone.
  for (const DecodeCall& call : calls)
    if (!call.cache->batchable(call.scores)) call.cache->record_decode(layer, call.q, call.out, call.scores);
  for (const DecodeCall& call : calls)
    if (call.cache->batchable(call.scores)) call.cache->finish_batched_decode(layer, call.q);
  backend.submit();
}

}  // namespace kvc
