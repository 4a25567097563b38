// kvc_attend_batch_device's work once its arguments passed every check: one decode step of
// `layer` for many caches of one backend in one operation (or inside the open step). The caches
// whose policy attends through the plain op and needs no scores share the batched decode
// kernel; the others attend on their own, as kvc_attend_device would; then each policy does
// its per-step work (eviction, observed queries) in the caches' order. A failure puts every
// cache back as it was.
#pragma once

#include <vector>

#include "cache/cache.h"

namespace kvc {

struct DecodeCall {
  Cache* cache = nullptr;
  View q, out, scores;  // scores optional
};

void attend_batch_device(Backend& backend, uint32_t layer, const std::vector<DecodeCall>& calls);

}  // namespace kvc
