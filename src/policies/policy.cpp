#include "policies/policy.h"

#include "cache/cache.h"

namespace kvc {

AppendPlacement Policy::place_append(Cache& cache, uint32_t layer, uint32_t) {
  AppendPlacement placement;
  placement.first_slot = cache.layer(layer).slots_held;
  return placement;
}

uint32_t Policy::read_slots(const Cache& cache, uint32_t layer) const { return cache.layer(layer).slots_held; }

}  // namespace kvc
