// kvc_cache_append_batch_device's work once its arguments passed every check: one chunk of
// n_tokens appended to `layer` of many caches of one backend in one operation (or inside the
// open step). Every cache's policy first records what it does before the chunk lands (FAEDKV
// and FOURIER fold the window's oldest tokens, each in its own dispatches), then every chunk's
// rows land through one batched op, then each cache does its bookkeeping: what
// kvc_cache_append_device does per cache, with the rows of all of them in one dispatch per
// group. A failure puts every cache back as it was (on the CPU, where work runs at once, the
// checks came first).
#pragma once

#include <vector>

#include "cache/cache.h"

namespace kvc {

struct AppendCall {
  Cache* cache = nullptr;
  View k, v;
};

void append_batch_device(Backend& backend, uint32_t layer, uint32_t n_tokens, const std::vector<AppendCall>& calls);

}  // namespace kvc
