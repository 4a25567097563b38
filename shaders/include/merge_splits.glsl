// Flash-decoding, pass 2, shared by attention_merge (one cache) and attention_merge_batch
// (many): combines one query head's split partials into its output row and its log-sum-exp.
// Parallel over the splits (a serial loop over them per thread was latency-bound: tens of
// microseconds) and over the dims: each workgroup takes one block of a head's dims
// (merge_dim_blocks in ops/decode_split_vulkan.h; the merges give it the grid's z), finding the
// head's statistics itself, so a step's merge is not left to one workgroup per query head.
// The includer declares partials[] ([row][m, l, acc...]) and lse[], the constants HEAD_DIM,
// OUT_F16 and WG (its workgroup size, a power of two), and names the output's uint words
// KVC_MERGE_OUT_WORDS; evict_one_kernel.glsl includes it to merge in the eviction's dispatch
// (ops/decode_evict.h).
#include "elements.glsl"

const uint CHUNKS = HEAD_DIM / 4;  // of 4 dims; the dim blocks divide them
const uint STRIDE = HEAD_DIM + 2;

const uint FOLD_WIDTH = 8;  // values one thread folds at the first level
const uint FOLD_PARTS = WG >= FOLD_WIDTH ? WG / FOLD_WIDTH : 1u;
shared float fold_s[WG];
shared vec4 acc_s[WG];

// The max (or sum) over the workgroup of every thread's `value`, in every thread, in one order
// whatever the device's subgroups (a pipeline's subgroup size may differ from another's on some
// devices, and the merges of every pipeline must give the same bits): threads' values to
// shared memory, then one thread per FOLD_WIDTH of them, then every thread over those parts, in
// order: four barriers (a tree over 128 threads takes nine).
float fold(float value, bool take_max) {
  const uint t = gl_LocalInvocationID.x;
  fold_s[t] = value;
  barrier();
  const uint width = min(FOLD_WIDTH, WG);
  const bool folds_part = t < FOLD_PARTS;
  float folded = 0.0;
  if (folds_part) {
    folded = fold_s[t * width];
    for (uint i = 1; i < width; ++i) folded = take_max ? max(folded, fold_s[t * width + i]) : folded + fold_s[t * width + i];
  }
  barrier();  // every part is read before the parts overwrite the first entries
  if (folds_part) fold_s[t] = folded;
  barrier();
  float result = fold_s[0];
  for (uint p = 1; p < FOLD_PARTS; ++p) result = take_max ? max(result, fold_s[p]) : result + fold_s[p];
  barrier();  // every thread has read fold_s before the next fold overwrites it
  return result;
}

// The statistics of the partial rows first_row .. first_row + num_splits - 1: the largest m
// (x) and the sum of l * exp(m - largest) (y); the head's log-sum-exp is x + log(y). A thread's
// first (m, l) is loaded at once, so that where the splits are no more than the threads the sum
// needs no second load. The sum is `precise`: the merge is compiled into several pipelines
// (attention_merge, attention_merge_batch, evict_one), and a product fused into its add in one
// but not another would round differently.
vec2 split_statistics(uint first_row, uint num_splits) {
  const uint t = gl_LocalInvocationID.x;
  vec2 first_pair = vec2(KVC_NEG_INF, 0.0);  // (m, l) of split t
  if (t < num_splits) first_pair = vec2(partials[(first_row + t) * STRIDE], partials[(first_row + t) * STRIDE + 1]);
  float largest = first_pair.x;
  for (uint s = t + WG; s < num_splits; s += WG) largest = max(largest, partials[(first_row + s) * STRIDE]);
  largest = fold(largest, true);
  precise float sum = t < num_splits ? first_pair.y * exp(first_pair.x - largest) : 0.0;
  for (uint s = t + WG; s < num_splits; s += WG) {
    const uint at = (first_row + s) * STRIDE;
    sum += partials[at + 1] * exp(partials[at] - largest);
  }
  return vec2(largest, fold(sum, false));
}

// Dim block `block` of `blocks` of head `head` of the output from partial rows first_row ..
// first_row + num_splits - 1; block 0 also writes the head's log-sum-exp.
void merge_splits(uint first_row, uint num_splits, uint head, uint lse_index, uint block, uint blocks) {
  const uint t = gl_LocalInvocationID.x;
  const uint first = first_row * STRIDE;
  const vec2 statistics = split_statistics(first_row, num_splits);
  const float m_all = statistics.x, l_all = statistics.y;

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
  if (t == 0 && block == 0) lse[lse_index] = m_all + log(l_all);
}
