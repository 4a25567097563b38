#include "picks.h"

#include <algorithm>
#include <limits>

namespace kvc::fuzz {
namespace {

template <typename T>
T pick_from(FuzzedDataProvider& data, std::initializer_list<T> choices) {
  return *(choices.begin() + data.ConsumeIntegralInRange<size_t>(0, choices.size() - 1));
}

}  // namespace

bool pick_rarely(FuzzedDataProvider& data, uint8_t one_in) { return data.ConsumeIntegralInRange<uint8_t>(1, one_in) == 1; }

uint32_t pick_count(FuzzedDataProvider& data, uint32_t typical_min, uint32_t typical_max, std::initializer_list<uint32_t> absurd) {
  if (absurd.size() > 0 && pick_rarely(data, 8)) return pick_from(data, absurd);
  // a range computed from an absurd capacity may be empty: its lower end then
  return data.ConsumeIntegralInRange<uint32_t>(typical_min, std::max(typical_min, typical_max));
}

float pick_float(FuzzedDataProvider& data, std::initializer_list<float> typical) {
  if (pick_rarely(data, 8))
    return pick_from(data, {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()});
  return pick_from(data, typical);
}

}  // namespace kvc::fuzz
