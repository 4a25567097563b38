#include "policies/full.h"

#include <string>

#include "cache/cache.h"

namespace kvc {

void FullPolicy::check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const {
  const uint32_t held = cache.layer(layer).slots_held;
  require(uint64_t(held) + n_tokens <= capacity_, KVC_ERROR_CAPACITY,
          [&] { return "layer " + std::to_string(layer) + " holds " + std::to_string(held) + " of " + std::to_string(capacity_) +
              " slots; " + std::to_string(n_tokens) + " more do not fit (FULL policy never evicts)"; });
}

int32_t FullPolicy::position_for_slot(const Cache&, uint32_t, uint32_t, uint64_t token_index) const {
  return static_cast<int32_t>(token_index);
}

}  // namespace kvc
