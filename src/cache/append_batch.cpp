#include "cache/append_batch.h"

namespace kvc {

void append_batch_device(Backend& backend, uint32_t layer, uint32_t n_tokens, const std::vector<AppendCall>& calls) {
  backend.begin();
  for (const AppendCall& call : calls) call.cache->enlist();
  // A policy's work before its chunk lands reads only its own cache, so every cache's can be
  // recorded before the rows of all of them.
  std::vector<std::vector<ops::AppendEntry>> rows_of_call;
  std::vector<ops::AppendEntry> rows;
  for (const AppendCall& call : calls) {
    rows_of_call.push_back(call.cache->plan_append(layer, n_tokens, call.k, call.v));
    rows.insert(rows.end(), rows_of_call.back().begin(), rows_of_call.back().end());
  }
  ops::append_rows_batch(backend, rows);
  for (size_t i = 0; i < calls.size(); ++i) calls[i].cache->finish_append(layer, n_tokens, rows_of_call[i]);
  backend.submit();
}

}  // namespace kvc
