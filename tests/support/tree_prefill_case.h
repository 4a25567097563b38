// One TreeKV prefill problem with random inputs (slots in a random order, random window
// scores), runnable on any backend with poisoned outputs.
#pragma once

#include <vector>

#include "ops/tree_prefill.h"

namespace kvc::test {

struct TreePrefillResult {
  std::vector<unsigned char> k, v;  // slots 0..kept-1 per kv head, [kv][kept][head_dim]
  std::vector<int32_t> positions;   // [kv][kept]
  std::vector<float> sums;          // [kv][kept]
  std::vector<uint32_t> counts;     // [kv][kept]
  bool operator==(const TreePrefillResult& other) const {
    return k == other.k && v == other.v && positions == other.positions && sums == other.sums && counts == other.counts;
  }
};

struct TreePrefillCase {
  ops::TreePrefillShape shape;
  std::vector<float> k, v;         // [kv][slot_stride][head_dim]; k's element 0 is the slot's rank
  std::vector<int32_t> positions;  // [kv][slot_stride]: a random permutation of the ranks
  std::vector<float> scores;       // [kv][slots_held]

  static TreePrefillCase random(Dtype dtype);
  TreePrefillResult run(Backend& backend) const;
};

}  // namespace kvc::test
