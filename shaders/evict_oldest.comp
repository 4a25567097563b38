#version 450
// One eviction under STREAMING's rule (ops/eviction_step.h: Oldest, a decode step's single
// eviction), as eviction_step.comp makes it: rank `sinks` leaves, every rank above it drops by
// one, and the last slot's token (rank and K, V rows) moves into the freed slot. No part waits
// for another here, so a thread takes one slot and the slots spread over many workgroups, where
// eviction_step's one workgroup per kv head walks them in passes between barriers. The victim's
// thread alone touches the last slot's rank: it lowers it (the vacated entry too, as the
// reference does) and moves it; its workgroup then moves the rows, a word a thread (one
// thread's loop of loads and stores to one buffer waited for memory at every word: 40 us).
// With MERGE the dispatch is also decode attention's merge (ops/decode_evict.h): its first
// workgroups merge the splits, one (query head, dim block) each, the rest evict; neither reads
// what the other writes, so the eviction costs no dispatch and no barrier of its own.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const bool MERGE = false;

layout(binding = 0) buffer Keys { uint k_words[]; };         // [num_kv_heads][slot_stride][HEAD_DIM]
layout(binding = 1) buffer Values { uint v_words[]; };
layout(binding = 2) buffer Positions { int positions[]; };   // ranks, [num_kv_heads][slot_stride]
layout(binding = 3) readonly buffer Partials { float partials[]; };  // MERGE: attention_decode's
layout(binding = 4) writeonly buffer Out { uint out_words[]; };      // MERGE: [num_q_heads][HEAD_DIM]
layout(binding = 5) writeonly buffer Lse { float lse[]; };           // MERGE: [num_q_heads]

layout(push_constant) uniform Push {
  uint slots_held;  // before the eviction
  uint slot_stride;
  uint sinks;       // the victim's rank
  uint num_splits;    // MERGE: partial rows per query head
  uint merge_groups;  // MERGE: the merge's workgroups per kv head (its query heads x merge_blocks), first in x
  uint merge_blocks;  // MERGE: dim blocks per query head
} push;

const uint WG = gl_WorkGroupSize.x;
const bool OUT_F16 = KV_F16;
#define KVC_MERGE_OUT_WORDS out_words
#include "merge_splits.glsl"

const uint ROW_WORDS = KV_F16 ? HEAD_DIM / 2 : HEAD_DIM;
const uint NONE = 0xFFFFFFFFu;

shared uint freed_s;  // the victim's slot, if this workgroup holds it

// Slot block `block` (WG slots) of kv head `kv_head`.
void evict(uint block, uint kv_head) {
  const uint t = gl_LocalInvocationID.x, slot = block * WG + t, last = push.slots_held - 1;
  const uint base = kv_head * push.slot_stride;
  if (t == 0) freed_s = NONE;
  barrier();
  if (slot < last) {  // the last slot's entries are the victim's thread's
    const uint rank = uint(positions[base + slot]);
    if (rank > push.sinks) {
      positions[base + slot] = int(rank) - 1;
    } else if (rank == push.sinks) {
      const int moved = positions[base + last], lowered = uint(moved) > push.sinks ? moved - 1 : moved;
      positions[base + last] = lowered;
      positions[base + slot] = lowered;
      freed_s = slot;
    }
  }
  barrier();
  const uint freed = freed_s;
  if (freed == NONE) return;
  const uint to_row = (base + freed) * ROW_WORDS, from_row = (base + last) * ROW_WORDS;
  for (uint w = t; w < ROW_WORDS; w += WG) {
    k_words[to_row + w] = k_words[from_row + w];
    v_words[to_row + w] = v_words[from_row + w];
  }
}

// Workgroup (x, kv head): without MERGE x is the slot block; with it the first merge_groups
// merge the kv head's query heads, the rest take its slot blocks.
void main() {
  const uint x = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y;
  if (!MERGE) {
    evict(x, kv_head);
    return;
  }
  if (x < push.merge_groups) {
    const uint head = kv_head * (push.merge_groups / push.merge_blocks) + x / push.merge_blocks;
    merge_splits(head * push.num_splits, push.num_splits, head, head, x % push.merge_blocks, push.merge_blocks);
    return;
  }
  evict(x - push.merge_groups, kv_head);
}
