// Flash-decoding's merge, shared by attention_merge, attention_merge_batch and attention_decode
// (whose last workgroup of a block merges): one query head's partials from its splits (max m,
// sum l, the unnormalised accumulator: rows of HEAD_DIM + 2 floats) combined into its output
// row and log-sum-exp by every thread of the workgroup, parallel over the splits (a serial loop
// over them per thread was latency-bound: tens of microseconds). The includer declares
// partials[] and lse[], the constants HEAD_DIM and OUT_F16, a power-of-two workgroup of at least
// HEAD_DIM / 4 threads, and names the output's uint words KVC_MERGE_OUT_WORDS; it includes
// elements.glsl first.
#ifndef KVC_MERGE_SPLITS_GLSL
#define KVC_MERGE_SPLITS_GLSL

const uint MERGE_WG = gl_WorkGroupSize.x;
const uint MERGE_CHUNKS = HEAD_DIM / 4;
const uint MERGE_SPLIT_LANES = MERGE_WG / MERGE_CHUNKS;  // threads summing the same 4 dims over different splits
const uint MERGE_STRIDE = HEAD_DIM + 2;

shared float merge_reduce_s[MERGE_WG];
shared vec4 merge_acc_s[MERGE_WG];

// The sum (or max) of every thread's `value`; all threads get it.
float merge_reduce(float value, bool take_max) {
  const uint t = gl_LocalInvocationID.x;
  merge_reduce_s[t] = value;
  barrier();
  for (uint width = MERGE_WG / 2; width > 0; width /= 2) {
    if (t < width) {
      const float other = merge_reduce_s[t + width];
      const float mine = merge_reduce_s[t];
      merge_reduce_s[t] = take_max ? max(mine, other) : mine + other;
    }
    barrier();
  }
  const float result = merge_reduce_s[0];
  barrier();
  return result;
}

// Head `head` of the output from partial rows first_row .. first_row + num_splits - 1; its
// log-sum-exp to lse[lse_index]. Ends with a barrier, so it may run again for another head.
void merge_splits(uint first_row, uint num_splits, uint head, uint lse_index) {
  const uint t = gl_LocalInvocationID.x;
  const uint first = first_row * MERGE_STRIDE;

  float m_local = KVC_NEG_INF;
  for (uint s = t; s < num_splits; s += MERGE_WG) m_local = max(m_local, partials[first + s * MERGE_STRIDE]);
  const float m_all = merge_reduce(m_local, true);
  float l_local = 0.0;
  for (uint s = t; s < num_splits; s += MERGE_WG)
    l_local += partials[first + s * MERGE_STRIDE + 1] * exp(partials[first + s * MERGE_STRIDE] - m_all);
  const float l_all = merge_reduce(l_local, false);

  const uint chunk = t % MERGE_CHUNKS, split_lane = t / MERGE_CHUNKS;
  vec4 acc = vec4(0);
  if (split_lane < MERGE_SPLIT_LANES) {
    for (uint s = split_lane; s < num_splits; s += MERGE_SPLIT_LANES) {
      const uint base = first + s * MERGE_STRIDE;
      const uint e = base + 2 + chunk * 4;
      acc += exp(partials[base] - m_all) * vec4(partials[e], partials[e + 1], partials[e + 2], partials[e + 3]);
    }
  }
  merge_acc_s[t] = acc;
  barrier();
  if (split_lane == 0) {
    vec4 o = vec4(0);
    for (uint lane = 0; lane < MERGE_SPLIT_LANES; ++lane) o += merge_acc_s[lane * MERGE_CHUNKS + chunk];
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
  if (t == 0) lse[lse_index] = m_all + log(l_all);
  barrier();  // merge_acc_s is free again
}

#endif
