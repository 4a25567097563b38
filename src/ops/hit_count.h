// Hits per key (HitKV, Definition 1 and Eq. 1): every observation row (one window query of
// one query head) names its top-K keys; a key's count is the number of rows of its kv head's
// group that name it. Counts are integers, so the GPU and the CPU agree exactly.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace kvc::ops {

struct HitCountShape {
  uint32_t num_kv_heads = 0;
  uint32_t rows_per_kv_head = 0;  // observation rows of one kv head (group heads x window queries)
  uint32_t hits_per_row = 0;      // K: the indices each row names
  uint32_t index_stride = 0;      // indices allocated per row, >= hits_per_row
  uint32_t num_keys = 0;          // keys counted per kv head
};

struct HitCountArgs {
  View indices;  // uint32 [num_kv_heads * rows_per_kv_head][index_stride], each < num_keys, distinct per row
  View counts;   // uint32 [num_kv_heads][num_keys]
};

void hit_count(Backend& backend, const HitCountShape& shape, const HitCountArgs& args);
void hit_count_cpu(const HitCountShape& shape, const HitCountArgs& args);
void hit_count_vulkan(Backend& backend, const HitCountShape& shape, const HitCountArgs& args);

}  // namespace kvc::ops
