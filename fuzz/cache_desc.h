// A kvc_cache_desc decoded from fuzz input: a small shape (or an invalid one), any policy, and
// that policy's parameter struct with its optional tables, each table as long as kvc.h says
// libkvc reads it (so an over-read is libkvc's bug, caught by AddressSanitizer).
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <vector>

#include "kvc/kvc.h"

namespace kvc::fuzz {

class FuzzedCacheDesc {
 public:
  explicit FuzzedCacheDesc(FuzzedDataProvider& data);
  FuzzedCacheDesc(const FuzzedCacheDesc&) = delete;  // desc_.policy_params points into this object
  FuzzedCacheDesc& operator=(const FuzzedCacheDesc&) = delete;

  const kvc_cache_desc& desc() const { return desc_; }

 private:
  void decode_shape(FuzzedDataProvider& data);
  void decode_eviction(FuzzedDataProvider& data);
  void decode_window(FuzzedDataProvider& data);
  void decode_freqkv(FuzzedDataProvider& data);
  void decode_faedkv(FuzzedDataProvider& data);
  void decode_fourier(FuzzedDataProvider& data);
  // A params struct_size: its own size mostly, now and then one too small.
  uint32_t decode_struct_size(FuzzedDataProvider& data, uint32_t full_size);
  // Whether a table of `entries` per-layer rows is worth building: the shape must be valid
  // enough for libkvc to read it, and small.
  bool table_fits(size_t entries) const;

  kvc_cache_desc desc_;
  kvc_eviction_params eviction_{};
  kvc_window_policy_params window_{};
  kvc_freqkv_params freqkv_{};
  kvc_faedkv_params faedkv_{};
  kvc_fourier_params fourier_{};
  std::vector<uint32_t> layer_sizes_;  // layer_capacities or layer_budgets
  std::vector<float> key_floats_, value_floats_;  // chunk_importance, or key_ratios / value_ratios
  std::vector<uint8_t> key_flags_, value_flags_;  // chunk_keep, or key_dims / value_dims
};

}  // namespace kvc::fuzz
