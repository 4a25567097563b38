// Flash-decoding, pass 2, shared by attention_merge (one cache) and attention_merge_batch
// (many): combines one query head's split partials into its output row and its log-sum-exp.
// Parallel over the splits (a serial loop over them per thread was latency-bound: tens of
// microseconds) and over the dims: each workgroup takes one block of a head's dims
// (merge_dim_blocks in ops/decode_split_vulkan.h; the merges give it the grid's z), finding the
// head's statistics itself, so a step's merge is not left to one workgroup per query head.
// The includer declares partials[] ([row][m, l, acc...]) and lse[], the constants HEAD_DIM,
// OUT_F16 and WG (its workgroup size, a power of two), and names the output's uint words
// KVC_MERGE_OUT_WORDS; evict_oldest includes it to merge in the eviction's dispatch
// (ops/decode_evict.h).
#include "elements.glsl"

const uint CHUNKS = HEAD_DIM / 4;  // of 4 dims; the dim blocks divide them
const uint STRIDE = HEAD_DIM + 2;

shared float reduce_s[WG];
shared vec4 acc_s[WG];

// The sum (or max) of every thread's `value`; all threads get it.
float workgroup_reduce(float value, bool take_max) {
  reduce_s[gl_LocalInvocationID.x] = value;
  barrier();
  for (uint width = WG / 2; width > 0; width /= 2) {
    if (gl_LocalInvocationID.x < width) {
      const float other = reduce_s[gl_LocalInvocationID.x + width];
      const float mine = reduce_s[gl_LocalInvocationID.x];
      reduce_s[gl_LocalInvocationID.x] = take_max ? max(mine, other) : mine + other;
    }
    barrier();
  }
  const float result = reduce_s[0];
  barrier();
  return result;
}

// Dim block `block` of `blocks` of head `head` of the output from partial rows first_row ..
// first_row + num_splits - 1; block 0 also writes the head's log-sum-exp.
void merge_splits(uint first_row, uint num_splits, uint head, uint lse_index, uint block, uint blocks) {
  const uint t = gl_LocalInvocationID.x;
  const uint first = first_row * STRIDE;

  float m_local = KVC_NEG_INF;
  for (uint s = t; s < num_splits; s += WG) m_local = max(m_local, partials[first + s * STRIDE]);
  const float m_all = workgroup_reduce(m_local, true);
  float l_local = 0.0;
  for (uint s = t; s < num_splits; s += WG)
    l_local += partials[first + s * STRIDE + 1] * exp(partials[first + s * STRIDE] - m_all);
  const float l_all = workgroup_reduce(l_local, false);

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
