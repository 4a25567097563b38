#include "ops/bin_span.h"

#include <algorithm>

namespace kvc::ops {

BinSpan mirrored_bin_span(const std::vector<uint32_t>& bins, uint32_t length) {
  std::vector<uint32_t> points;
  points.reserve(2 * bins.size());
  for (const uint32_t k : bins) {
    points.push_back(k % length);
    points.push_back((length - k % length) % length);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  if (points.empty()) return {0, length};
  // The run is the circle less its widest gap between neighbouring points.
  uint64_t widest = 0;
  uint32_t after_widest = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const uint64_t next = i + 1 < points.size() ? points[i + 1] : uint64_t(points[0]) + length;
    if (next - points[i] > widest) {
      widest = next - points[i];
      after_widest = uint32_t(next % length);
    }
  }
  if (widest <= 1) return {0, length};
  return {after_widest, uint32_t(length - widest + 1)};
}

}  // namespace kvc::ops
