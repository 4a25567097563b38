#version 450
// TreeKV prefill (see src/ops/tree_prefill.h): one workgroup per kv head. Pass 1 maps ranks
// to slots, pass 2 scores the blocks, thread 0 runs Algorithm 1 over the blocks (a linked
// list in shared memory), pass 3 writes the kept tokens to their new ranks.
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

const uint NONE = 0xFFFFFFFFu;
// The tree's blocks as a linked list: node -> block, node -> next node (node 0 is the head).
shared uint node_block_s[MAX_TREE_BLOCKS + 1];
shared uint node_next_s[MAX_TREE_BLOCKS + 1];

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
    scratch[new_start + block] = NONE;
  }
  sync();
  if (t == 0) {
    // Algorithm 1 over the blocks as they arrive, with static scores, on a linked list so that
    // each eviction is O(1): node 0 is the head, `cursor` the node before the scope's left
    // member, and at most budget + 1 nodes are in use (one freed node waits in `spare`).
    node_next_s[0] = NONE;
    uint tail = 0, size = 0, idx = 0, cursor = 0, fresh = 1, spare = NONE;
    for (uint block = 0; block < push.blocks; ++block) {
      uint node = spare;
      if (node == NONE) node = fresh++;
      spare = NONE;
      node_block_s[node] = block;
      node_next_s[node] = NONE;
      node_next_s[tail] = node;
      tail = node;
      if (++size <= push.budget) continue;
      if (push.budget == 0) {
        node_next_s[0] = NONE;
        tail = 0, size = 0, spare = node;
        continue;
      }
      const uint left = node_next_s[cursor], right = node_next_s[left];
      if (uintBitsToFloat(scratch[block_scores + node_block_s[left]]) > uintBitsToFloat(scratch[block_scores + node_block_s[right]])) {
        node_next_s[left] = node_next_s[right];
        if (tail == right) tail = left;
        spare = right;
        cursor = left;
      } else {
        node_next_s[cursor] = right;
        spare = left;
        cursor = right;
      }
      --size;
      idx = (idx + 1) % push.budget;
      if (idx == 0) cursor = 0;
    }
    uint kept_blocks = 0;
    for (uint node = node_next_s[0]; node != NONE; node = node_next_s[node])
      scratch[new_start + node_block_s[node]] = push.sinks + (kept_blocks++) * push.block;
  }
  sync();
  for (uint rank = t; rank < held; rank += WG) {
    uint new_rank = NONE;
    if (rank < push.sinks) new_rank = rank;
    else if (rank >= held - push.recent_window) new_rank = push.kept - (held - rank);
    else if (rank >= push.middle_first) {
      const uint offset = rank - push.middle_first, start = scratch[new_start + offset / push.block];
      if (start != NONE) new_rank = start + offset % push.block;
    }
    if (new_rank == NONE) continue;
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
