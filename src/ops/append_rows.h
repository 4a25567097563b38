// Appending a chunk of tokens to a cache layer: K and V arrive token-major
// ([num_tokens][num_kv_heads][head_dim], as an engine's projections produce them) and land in
// the cache's head-major rows ([num_kv_heads][slot_stride][head_dim]) at slots first_slot ..
// first_slot + num_tokens - 1 of every kv head, each slot's position being first_position +
// its token index (every policy numbers a chunk's tokens consecutively). With RoPE, keys are
// rotated to those positions as they land (a policy whose positions never change stores them
// so, and attention reads them as stored).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"
#include "ops/rope.h"

namespace kvc::ops {

struct AppendRowsShape {
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;     // a multiple of 8, so a row is whole 32-bit words in f16 too
  uint32_t slot_stride = 0;  // slots allocated per kv head in the cache
  uint32_t first_slot = 0;
  uint32_t num_tokens = 0;   // first_slot + num_tokens <= slot_stride
  int32_t first_position = 0;
  Dtype dtype = Dtype::F32;
  uint32_t source_token = 0;  // tokens of k and v before the chunk's first (a chunk that wraps a ring)
  RopeParams rope;            // enabled: keys are stored rotated to their positions
};

struct AppendRowsArgs {
  View k, v;            // [source_token + num_tokens][num_kv_heads][head_dim]
  View k_cache, v_cache;  // [num_kv_heads][slot_stride][head_dim]
  View positions;       // int32 [num_kv_heads][slot_stride]
  View turn_table;      // rope_turn_table(rope); Vulkan with RoPE only
};

void append_rows(Backend& backend, const AppendRowsShape& shape, const AppendRowsArgs& args);
void append_rows_cpu(const AppendRowsShape& shape, const AppendRowsArgs& args);
void append_rows_vulkan(Backend& backend, const AppendRowsShape& shape, const AppendRowsArgs& args);

}  // namespace kvc::ops
