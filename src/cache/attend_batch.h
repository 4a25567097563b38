// kvc_attend_batch_device's work once its arguments passed every check: one decode step of
// `layer` for many caches of one backend in one operation (or inside the open step). The caches
// whose policy attends through the plain op and needs no scores share the batched decode
// kernel, then their policies do their per-step work (eviction, observed queries); the others
// attend and do their policy's work on their own, as kvc_attend_device would. A failure puts
// every cache back as it was (on the CPU, where work runs at once, the checks came first).
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
