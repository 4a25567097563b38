// The CPU references' softmax of one query over rows of keys, shared by attention and the
// window scores so that both references compute probabilities the same way: logits
// q.k * scale in double, the maximum subtracted, normalised directly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kvc::ops {

// probs[slot] for slot < visible: softmax over keys[slot * dim .. + dim) of query . key * scale;
// the logits too when asked (rankings by them see no ties where probabilities underflow).
inline void softmax_over_keys(const float* query, const float* keys, uint32_t visible, uint32_t dim, double scale,
                              std::vector<double>& probs, std::vector<double>* logits = nullptr) {
  double max_logit = -HUGE_VAL;
  for (uint32_t slot = 0; slot < visible; ++slot) {
    double dot = 0.0;
    for (uint32_t d = 0; d < dim; ++d) dot += double(query[d]) * keys[size_t(slot) * dim + d];
    probs[slot] = dot * scale;
    max_logit = std::max(max_logit, probs[slot]);
  }
  if (logits) std::copy(probs.begin(), probs.begin() + visible, logits->begin());
  double sum = 0.0;
  for (uint32_t slot = 0; slot < visible; ++slot) sum += (probs[slot] = std::exp(probs[slot] - max_logit));
  for (uint32_t slot = 0; slot < visible; ++slot) probs[slot] /= sum;
}

}  // namespace kvc::ops
