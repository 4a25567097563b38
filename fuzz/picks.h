// Fuzzed integers and floats: mostly small values a cache of a few dozen slots accepts, now
// and then a boundary or an absurd value that must be refused. Absurd sizes are chosen among
// values libkvc must refuse before allocating, so that the fuzzer's memory limit only catches
// libkvc's own over-allocation, never a huge request the API allows.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <initializer_list>

namespace kvc::fuzz {

// typical_min..typical_max, or (one time in eight) one of `absurd`.
uint32_t pick_count(FuzzedDataProvider& data, uint32_t typical_min, uint32_t typical_max, std::initializer_list<uint32_t> absurd);

// A float from `typical` or, one time in eight, 0, -1, NaN, Inf, a huge or a tiny value.
float pick_float(FuzzedDataProvider& data, std::initializer_list<float> typical);

// true one time in `one_in`.
bool pick_rarely(FuzzedDataProvider& data, uint8_t one_in);

}  // namespace kvc::fuzz
