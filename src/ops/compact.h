// Stable compaction of a cache layer: per kv head, the selected slots (ascending indices)
// followed by a tail kept whole (the observation window, which SnapKV and HitKV always keep)
// are gathered, in that order, to the front of the destination. K, V and positions move
// together, so each kept key keeps the position RoPE rotates it by.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

struct CompactShape {
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t slot_stride = 0;    // slots allocated per kv head in the sources
  uint32_t num_selected = 0;   // indices taken per kv head
  uint32_t index_stride = 0;   // indices allocated per kv head, >= num_selected
  uint32_t tail_first = 0;     // first slot of the tail
  uint32_t tail_length = 0;    // slots of the tail
  Dtype dtype = Dtype::F32;    // of k and v
  uint32_t out_slot_stride = 0;  // slots allocated per kv head in the destinations, >= kept slots
};

struct CompactArgs {
  View indices;        // uint32 [num_kv_heads][index_stride], ascending, each < tail_first
  View k, v;           // [num_kv_heads][slot_stride][head_dim]
  View positions;      // int32 [num_kv_heads][slot_stride]
  View k_out, v_out;   // [num_kv_heads][out_slot_stride][head_dim]; other tensors than k and v
                       // (a gather in place would race)
  View positions_out;  // int32 [num_kv_heads][out_slot_stride]
};

void compact(Backend& backend, const CompactShape& shape, const CompactArgs& args);
void compact_cpu(const CompactShape& shape, const CompactArgs& args);
void compact_vulkan(Backend& backend, const CompactShape& shape, const CompactArgs& args);

}  // namespace kvc::ops
