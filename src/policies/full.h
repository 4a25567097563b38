// FULL: every token is kept, at its original position, up to the cache's capacity.
#pragma once

#include "policies/policy.h"

namespace kvc {

class FullPolicy : public Policy {
 public:
  explicit FullPolicy(const CacheConfig& config) : capacity_(config.capacity) {}
  uint32_t slots_allocated() const override { return capacity_; }
  void check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const override;
  std::unique_ptr<Policy> clone() const override { return std::make_unique<FullPolicy>(*this); }
  int32_t position_for_slot(const Cache& cache, uint32_t layer, uint32_t slot, uint64_t token_index) const override;
  bool keeps_positions() const override { return true; }
  bool appends_inside_decode() const override { return true; }

 private:
  uint32_t capacity_;
};

}  // namespace kvc
