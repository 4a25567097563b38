// Attention over a cache: a chunk of queries (1 for decode) whose own tokens are the last
// num_queries cached slots; query i sees every slot up to its own (causal). Keys are stored
// before RoPE and rotated to their slot's position as they are read, or, with keys_rotated,
// stored rotated already (a policy whose positions never change); queries are rotated to the
// positions of their own slots (kv head 0's). Softmax scale 1/sqrt(head_dim); f32
// accumulation. Optionally also returns, per kv head and slot, the attention probability
// summed over the kv head's query heads and the chunk's queries (the score-based policies'
// input); for one query, optionally its logits and log-sum-exps instead (or as well), from
// which a consumer forms the probabilities itself: one dispatch fewer on the decode path.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "common/dtype.h"
#include "ops/rope.h"

namespace kvc::ops {

struct AttentionShape {
  uint32_t num_q_heads = 0;
  uint32_t num_kv_heads = 0;  // divides num_q_heads
  uint32_t head_dim = 0;      // multiple of 8, <= 256
  uint32_t num_queries = 0;   // >= 1, <= num_slots
  uint32_t num_slots = 0;     // slots attended, the chunk's included
  uint32_t slot_stride = 0;   // slots allocated per kv head in k, v and positions
  Dtype dtype = Dtype::F32;   // of q, k, v and out
  RopeParams rope;
  bool keys_rotated = false;  // with RoPE: k holds keys rotated to their slots' positions

  // The RoPE the kernels apply to keys as they read them: none where keys are stored rotated.
  RopeParams key_rope() const { return keys_rotated ? RopeParams{} : rope; }
};

struct AttentionArgs {
  View q;           // [num_queries][num_q_heads][head_dim]
  View k;           // [num_kv_heads][slot_stride][head_dim], before RoPE unless keys_rotated
  View v;           // [num_kv_heads][slot_stride][head_dim]
  View positions;   // int32 [num_kv_heads][slot_stride]; read with RoPE only
  View turn_table;  // rope_turn_table(rope); Vulkan with RoPE only
  View out;         // [num_queries][num_q_heads][head_dim]
  View scores;      // optional, f32 [num_kv_heads][num_slots]
  // Optional, one query only, both or neither: each query head's logits q.k / sqrt(head_dim)
  // (f32 [num_kv_heads][num_slots][group]: a slot's logits of one kv head's query heads side by
  // side, so that the decode stores a key's in 16-byte vectors) and their log-sum-exp (f32 [num_q_heads]), so
  // that query head h = kv * group + g gives slot s probability exp(logits[kv][s][g] - lse[h]).
  View logits;
  View lse;
};

void attention(Backend& backend, const AttentionShape& shape, const AttentionArgs& args);
// Whether attention_vulkan runs this chunk on cooperative matrices: the device's path is
// cooperative (vk::Device::matrix_path), the chunk has more than one query, the cache is f16
// and head_dim a multiple of 16 up to 128, the workgroup fits the device, and with RoPE the keys
// rotated once (rotated_reads_vulkan.h) fit one binding.
bool attention_on_cooperative_matrices(Backend& backend, const AttentionShape& shape);
void attention_cpu(const AttentionShape& shape, const AttentionArgs& args);
void attention_vulkan(Backend& backend, const AttentionShape& shape, const AttentionArgs& args);

}  // namespace kvc::ops
