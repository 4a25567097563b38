// Flash-decoding, pass 2, shared by attention_merge (one cache) and attention_merge_batch
// (many): combines one query head's split partials into its output row and its log-sum-exp.
// Parallel over the splits (a serial loop over them per thread was latency-bound: tens of
// microseconds) and over the dims: each workgroup takes one block of a head's dims
// (merge_dim_blocks in ops/decode_split_vulkan.h; the merges give it the grid's z), finding the
// head's statistics itself, so a step's merge is not left to one workgroup per query head.
// The includer enables GL_EXT_control_flow_attributes, declares partials[] ([row][m, l, acc...])
// and lse[], the constants HEAD_DIM, OUT_F16 and WG (its workgroup size, a power of two), and
// names the output's uint words KVC_MERGE_OUT_WORDS; evict_one and decode_merge_scores include
// it to merge in the eviction's dispatch (ops/decode_evict.h), decode_merge_scores also to form
// the log-sum-exps its scores need, bit for bit as the merge writes them (split_statistics).
#include "elements.glsl"

const uint CHUNKS = HEAD_DIM / 4;  // of 4 dims; the dim blocks divide them
const uint STRIDE = HEAD_DIM + 2;

// The statistics of up to STATISTICS_HEADS query heads are found together: decode_merge_scores
// defines KVC_STATISTICS_HEADS as a kv head's largest group, a merge needs one.
#ifndef KVC_STATISTICS_HEADS
#define KVC_STATISTICS_HEADS 1
#endif
#if KVC_STATISTICS_HEADS > 8
#error "fold_heads gives each head WG / 8 threads: at most 8 heads"
#endif
const uint STATISTICS_HEADS = KVC_STATISTICS_HEADS;
const uint FOLD_WIDTH = 8;  // values one thread folds at the first level
const uint FOLD_PARTS = WG >= FOLD_WIDTH ? WG / FOLD_WIDTH : 1u;
shared float fold_s[STATISTICS_HEADS * WG];
shared vec4 acc_s[WG];

// Per head h < heads, the max (or sum) over the workgroup of every thread's values[h], in every
// thread, in one order whatever the device's subgroups (a pipeline's subgroup size may differ
// from another's on some devices, and the merges of every pipeline must give the same bits):
// threads' values to shared memory, then one thread per FOLD_WIDTH of them, then every thread
// over those parts, in order: four barriers (a tree over 128 threads takes nine). WG >= 8.
void fold_heads(inout float values[STATISTICS_HEADS], uint heads, bool take_max) {
  const uint t = gl_LocalInvocationID.x;
  [[unroll]] for (uint h = 0; h < STATISTICS_HEADS; ++h)
    if (h < heads) fold_s[h * WG + t] = values[h];
  barrier();
  const uint head = t / FOLD_PARTS, part = t % FOLD_PARTS, width = min(FOLD_WIDTH, WG);
  const bool folds_part = head < heads;  // heads * FOLD_PARTS <= WG: STATISTICS_HEADS <= FOLD_WIDTH
  float folded = 0.0;
  if (folds_part) {
    const uint first = head * WG + part * width;
    folded = fold_s[first];
    for (uint i = 1; i < width; ++i) folded = take_max ? max(folded, fold_s[first + i]) : folded + fold_s[first + i];
  }
  barrier();  // every part is read before the parts overwrite their heads' first entries
  if (folds_part) fold_s[head * WG + part] = folded;
  barrier();
  [[unroll]] for (uint h = 0; h < STATISTICS_HEADS; ++h) {
    if (h < heads) {
      float result = fold_s[h * WG];
      for (uint p = 1; p < FOLD_PARTS; ++p) result = take_max ? max(result, fold_s[h * WG + p]) : result + fold_s[h * WG + p];
      values[h] = result;
    }
  }
  barrier();  // every thread has read fold_s before the next fold overwrites it
}

// The statistics of query heads h < heads (<= STATISTICS_HEADS) whose partial rows are
// first_row + h * num_splits .. + num_splits - 1: the largest m (x) and the sum of
// l * exp(m - largest) (y); a head's log-sum-exp is x + log(y). A thread's first (m, l) of
// every head is loaded at once, so that where the splits are no more than the threads the sums
// need no second load. The sums are `precise`: a product fused into its add would round
// differently in the one-head and the several-head forms of this code.
void split_statistics(uint first_row, uint num_splits, uint heads, out vec2 statistics[STATISTICS_HEADS]) {
  const uint t = gl_LocalInvocationID.x;
  vec2 first_pair[STATISTICS_HEADS];  // (m, l) of split t
  float largest[STATISTICS_HEADS];
  precise float sum[STATISTICS_HEADS];
  [[unroll]] for (uint h = 0; h < STATISTICS_HEADS; ++h) {
    first_pair[h] = vec2(KVC_NEG_INF, 0.0);
    if (h < heads && t < num_splits) {
      const uint at = (first_row + h * num_splits + t) * STRIDE;
      first_pair[h] = vec2(partials[at], partials[at + 1]);
    }
  }
  [[unroll]] for (uint h = 0; h < STATISTICS_HEADS; ++h) {
    largest[h] = first_pair[h].x;
    if (h < heads)
      for (uint s = t + WG; s < num_splits; s += WG) largest[h] = max(largest[h], partials[(first_row + h * num_splits + s) * STRIDE]);
  }
  fold_heads(largest, heads, true);
  [[unroll]] for (uint h = 0; h < STATISTICS_HEADS; ++h) {
    sum[h] = t < num_splits ? first_pair[h].y * exp(first_pair[h].x - largest[h]) : 0.0;
    if (h < heads) {
      for (uint s = t + WG; s < num_splits; s += WG) {
        const uint at = (first_row + h * num_splits + s) * STRIDE;
        sum[h] += partials[at + 1] * exp(partials[at] - largest[h]);
      }
    }
  }
  fold_heads(sum, heads, false);
  [[unroll]] for (uint h = 0; h < STATISTICS_HEADS; ++h) statistics[h] = vec2(largest[h], sum[h]);
}

// Dim block `block` of `blocks` of head `head` of the output from partial rows first_row ..
// first_row + num_splits - 1; block 0 also writes the head's log-sum-exp.
void merge_splits(uint first_row, uint num_splits, uint head, uint lse_index, uint block, uint blocks) {
  const uint t = gl_LocalInvocationID.x;
  const uint first = first_row * STRIDE;
  vec2 statistics[STATISTICS_HEADS];
  split_statistics(first_row, num_splits, 1u, statistics);
  const float m_all = statistics[0].x, l_all = statistics[0].y;

  // This workgroup's chunks, each summed by split_lanes threads over different splits.
  const uint block_chunks = CHUNKS / blocks, split_lanes = WG / block_chunks;
  const uint chunk = block * block_chunks + t % block_chunks, split_lane = t / block_chunks;
  vec4 acc = vec4(0);
  if (split_lane < split_lanes) {
    for (uint s = split_lane; s < num_splits; s += split_lanes) {
      const uint base = first + s * STRIDE;
      const uint e = base + 2 + chunk * 4;
      acc += exp(partials[base] - m_all) * vec4(partials[e], partials[e + 1], partials[e + 2], partials[e + 3]);
    }
  }
  acc_s[t] = acc;
  barrier();
  if (split_lane == 0) {
    vec4 o = vec4(0);
    for (uint lane = 0; lane < split_lanes; ++lane) o += acc_s[lane * block_chunks + t];
    o /= l_all;
    const uint e = head * HEAD_DIM + chunk * 4;
    if (OUT_F16) {
      KVC_MERGE_OUT_WORDS[e / 2] = packHalf2x16(o.xy);
      KVC_MERGE_OUT_WORDS[e / 2 + 1] = packHalf2x16(o.zw);
    } else {
      KVC_MERGE_OUT_WORDS[e] = floatBitsToUint(o.x);
      KVC_MERGE_OUT_WORDS[e + 1] = floatBitsToUint(o.y);
      KVC_MERGE_OUT_WORDS[e + 2] = floatBitsToUint(o.z);
      KVC_MERGE_OUT_WORDS[e + 3] = floatBitsToUint(o.w);
    }
  }
  // precise: decode_merge_scores forms the same log-sum-exp, and a fused form could differ.
  precise const float head_lse = m_all + log(l_all);
  if (t == 0 && block == 0) lse[lse_index] = head_lse;
}
