#version 450
// TreeKV prefill (see src/ops/tree_prefill.h): one workgroup per kv head. Pass 1 maps ranks
// to slots, pass 2 scores the blocks, thread 0 runs Algorithm 1 over the blocks (a list in
// shared memory), pass 3 writes the kept tokens to their new ranks.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint MAX_TREE_BLOCKS = 4096;

layout(binding = 0) readonly buffer Keys { uint k_words[]; };
layout(binding = 1) readonly buffer Values { uint v_words[]; };
layout(binding = 2) coherent buffer Positions { int positions[]; };
layout(binding = 3) readonly buffer Scores { float scores[]; };  // [num_kv_heads][slots_held]
layout(binding = 4) writeonly buffer KeysOut { uint k_out[]; };
layout(binding = 5) writeonly buffer ValuesOut { uint v_out[]; };
layout(binding = 6) writeonly buffer Sums { float sums[]; };
layout(binding = 7) writeonly buffer Counts { uint counts[]; };
// Per kv head: slot of each rank, block scores, new first rank of each block (or -1).
layout(binding = 8) coherent buffer Scratch { uint scratch[]; };

layout(push_constant) uniform Push {
  uint slots_held;
  uint slot_stride;
  uint num_queries;
  uint sinks;
  uint recent_window;
  uint block;
  uint middle_first;  // rank of block 0's first token
  uint blocks;
  uint budget;        // blocks kept
  uint kept;          // tokens kept
} push;

const uint WG = gl_WorkGroupSize.x;
const uint ROW_WORDS = KV_F16 ? HEAD_DIM / 2 : HEAD_DIM;

shared uint tree_s[MAX_TREE_BLOCKS];

void sync() {
  memoryBarrierBuffer();
  memoryBarrierShared();
  barrier();
}

uint window_count(uint rank) {
  const uint first_query = push.slots_held - push.num_queries;
  return push.slots_held - max(rank, first_query);
}

void main() {
  const uint kv_head = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint base = kv_head * push.slot_stride, held = push.slots_held;
  const uint slot_of_rank = 3 * base, block_scores = slot_of_rank + push.slot_stride, new_start = block_scores + push.slot_stride;
  for (uint slot = t; slot < held; slot += WG) scratch[slot_of_rank + uint(positions[base + slot])] = slot;
  sync();
  for (uint block = t; block < push.blocks; block += WG) {
    float sum = 0.0;
    for (uint i = 0; i < push.block; ++i) {
      const uint rank = push.middle_first + block * push.block + i;
      sum += scores[kv_head * held + scratch[slot_of_rank + rank]] / float(window_count(rank));
    }
    scratch[block_scores + block] = floatBitsToUint(sum);
    scratch[new_start + block] = 0xFFFFFFFFu;
  }
  sync();
  if (t == 0) {
    // Algorithm 1 over the blocks as they arrive, with static scores; idx is 0-based here.
    uint size = 0, idx = 0;
    for (uint block = 0; block < push.blocks; ++block) {
      tree_s[size++] = block;
      if (size <= push.budget) continue;
      if (push.budget == 0) {
        size = 0;
        continue;
      }
      const bool evict_right =
          uintBitsToFloat(scratch[block_scores + tree_s[idx]]) > uintBitsToFloat(scratch[block_scores + tree_s[idx + 1]]);
      for (uint i = idx + (evict_right ? 1 : 0); i + 1 < size; ++i) tree_s[i] = tree_s[i + 1];
      --size;
      idx = (idx + 1) % push.budget;
    }
    for (uint i = 0; i < size; ++i) scratch[new_start + tree_s[i]] = push.sinks + i * push.block;
  }
  sync();
  for (uint rank = t; rank < held; rank += WG) {
    uint new_rank = 0xFFFFFFFFu;
    if (rank < push.sinks) new_rank = rank;
    else if (rank >= held - push.recent_window) new_rank = push.kept - (held - rank);
    else if (rank >= push.middle_first) {
      const uint offset = rank - push.middle_first, start = scratch[new_start + offset / push.block];
      if (start != 0xFFFFFFFFu) new_rank = start + offset % push.block;
    }
    if (new_rank == 0xFFFFFFFFu) continue;
    const uint slot = scratch[slot_of_rank + rank];
    const uint from = (base + slot) * ROW_WORDS, to = (base + new_rank) * ROW_WORDS;
    for (uint w = 0; w < ROW_WORDS; ++w) {
      k_out[to + w] = k_words[from + w];
      v_out[to + w] = v_words[from + w];
    }
    sums[base + new_rank] = scores[kv_head * held + slot];
    counts[base + new_rank] = window_count(rank);
  }
  sync();
  for (uint rank = t; rank < push.kept; rank += WG) positions[base + rank] = int(rank);
}
