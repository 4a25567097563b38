#version 450
// FourierAttention decode, factorized route (ops/fourier_attention.h): flash-decoding's first
// pass over the middle tokens. Workgroup (split, kv head, block of GROUP_BLOCK query heads) takes
// blocks split, split + num_splits, ... of BLOCK = 2 WG middle tokens and writes one partial per
// query head (max m, sum l, the packed dims' accumulator, 0 at the compressed dims, which
// fourier_value_partials adds) at row first_split + split of the head's partials_per_head, in
// attention_merge's layout. A block in three steps, the first batch of each step's loads (W's
// share, K_BATCH K dims, V_BATCH V vectors) issued together before any is used:
//  1. thread t takes tokens 2t and 2t + 1: one word (f16; two in f32) of every packed K dim's
//     run, coalesced since a run is contiguous; their logits are q~ . k over the packed dims plus
//     the compressed dims' (F^T a)[token] + b from the inverse transform in W, where the whole
//     logit is written back (fourier_middle_weights turns it into the forward transform's input);
//  2. the block's maximum per query head; the running sums are rescaled where it moves (an
//     online softmax: one pass over the tokens), and the weights exp(logit - m) go to shared memory;
//  3. thread (packed V dim u, slice) reads 16-byte vectors of u's run, slices apart, and adds
//     their weighted values for every head of the block.
// docs/benchmarks.md (2026-11-27, fifteenth session) has the shapes measured and what is left:
// a block's steps take microseconds of a workgroup's time on the H100, far more than its loads
// and arithmetic account for.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;  // at least HEAD_DIM (a V dim per thread in step 3)
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GROUP_BLOCK = 4;  // divides the group: every head of a block is real
layout(constant_id = 3) const bool KV_F16 = false;
// Heads 2s and 2s + 1 of the block share W's sequence s: a thread's tokens 2t and 2t + 1 of both
// are 16 contiguous bytes, read and written as one vector (GROUP_BLOCK even, T even). Four
// 4-byte accesses a pair instead measured 3% more of FOURIER's decode step on the H100.
layout(constant_id = 4) const bool PAIRED = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Query { uint q_words[]; };              // [num_q_heads][HEAD_DIM]
layout(binding = 1) readonly buffer KeyWords { uint k_words[]; };           // [num_kv_heads][HEAD_DIM - k_compressed][middle_stride]
layout(binding = 1) readonly buffer KeyPairs { uvec2 k_pairs[]; };          // the same, two f32 tokens at a time
layout(binding = 2) readonly buffer Values { uvec4 v_vec[]; };              // [num_kv_heads][HEAD_DIM - v_compressed][middle_stride]
layout(binding = 3) readonly buffer KeyDims { uint k_dims[]; };             // [num_kv_heads][HEAD_DIM]
layout(binding = 4) readonly buffer ValueDims { uint v_dims[]; };
layout(binding = 5) buffer Spectrum { float spectrum[]; };                   // W: [pairs][T][2]; F^T a in, middle logits out
layout(binding = 5) buffer SpectrumQuads { vec4 spectrum_quads[]; };         // the same, two tokens of a pair at a time
layout(binding = 6) readonly buffer HeadTerms { float head_terms[]; };      // b at [head]
layout(binding = 7) writeonly buffer Partials { float partials[]; };        // [num_q_heads][partials_per_head][HEAD_DIM + 2]

layout(push_constant) uniform Push {
  uint num_middle;
  uint middle_stride;  // a multiple of 8: every run starts on 16 bytes
  uint k_compressed;
  uint v_compressed;
  uint group_size;
  uint num_splits;     // this dispatch's
  uint first_split;    // its split 0's row in a head's partials
  uint partials_per_head;
  uint window_length;
  float scale;         // 1 / sqrt(HEAD_DIM)
} push;

const uint WG = gl_WorkGroupSize.x;
const uint BLOCK = 2 * WG;                 // tokens per block: two a thread in step 1
const uint VEC = KV_F16 ? 8u : 4u;         // tokens per 16-byte vector of a run
// K dims whose words a thread holds at once (8 registers), and V vectors: batches of 32 and 8
// took 127 registers and made the step 5% slower on the H100 (docs/benchmarks.md).
const uint K_BATCH = KV_F16 ? 8u : 4u;
const uint V_BATCH = 2;

shared float q_s[HEAD_DIM * GROUP_BLOCK];  // [packed dim][head], scaled; 0 past the packed dims
shared vec2 weight_s[WG * GROUP_BLOCK];    // [thread][head]: the weights of tokens 2t, 2t + 1
shared float reduce_s[WG * GROUP_BLOCK];   // subgroups' partial maxima and sums; the slices' sums

// Per head of the block, the workgroup's max (or sum) of every thread's value, in every thread.
void reduce_heads(inout float values[GROUP_BLOCK], bool take_max) {
  [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {
    const float part = take_max ? subgroupMax(values[b]) : subgroupAdd(values[b]);
    if (subgroupElect()) reduce_s[b * WG + gl_SubgroupID] = part;
  }
  barrier();
  [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {
    float total = reduce_s[b * WG];
    for (uint s = 1; s < gl_NumSubgroups; ++s) total = take_max ? max(total, reduce_s[b * WG + s]) : total + reduce_s[b * WG + s];
    values[b] = total;
  }
  barrier();  // reduce_s is free again
}

uint spectrum_index(uint head, uint token) { return ((head >> 1) * push.window_length + token) * 2 + (head & 1u); }

// Where tokens `token` and `token` + 1 (token even) of an even head and the next are, in spectrum_quads.
uint spectrum_quad_index(uint head, uint token) { return ((head >> 1) * push.window_length + token) / 2; }

// Where tokens 2 word and 2 word + 1 of K's run `run` are, in k_words (f16) or k_pairs (f32).
uint key_pair_index(uint run, uint word) { return (run * push.middle_stride) / 2 + word; }

// Vector vi of V's run `run` in the block from token `first`, in v_vec.
uint value_vector_index(uint run, uint first, uint vi) { return (run * push.middle_stride + first) / VEC + vi; }

// The loads of a block's batches, into the registers steps 1 and 3 read: W's share of
// the logits of tokens 2t and 2t + 1 (spectrum_share), K dims u0 .. u0 + K_BATCH - 1 (k_half or
// k_full) and V vectors v0, v0 + slices, ... of dim u (v_words).
#define LOAD_SPECTRUM_SHARE(first, n)                                                               \
  if (PAIRED) {                                                                                     \
    [[unroll]] for (uint b = 0; b < GROUP_BLOCK; b += 2) {                                          \
      const vec4 quad = 2 * t < (n) ? spectrum_quads[spectrum_quad_index(head0 + b, (first) + 2 * t)] : vec4(0.0); \
      spectrum_share[b] = quad.xz;                                                                  \
      spectrum_share[b + 1] = quad.yw;                                                              \
    }                                                                                               \
  } else {                                                                                          \
    [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {                                             \
      const uint at = spectrum_index(head0 + b, (first) + 2 * t);                                  \
      spectrum_share[b] = 2 * t < (n) ? vec2(spectrum[at], 2 * t + 1 < (n) ? spectrum[at + 2] : 0.0) : vec2(0.0); \
    }                                                                                               \
  }
#define LOAD_KEYS(first, n, u0)                                                                     \
  [[unroll]] for (uint e = 0; e < K_BATCH; ++e) {                                                   \
    const bool wanted = 2 * t < (n) && (u0) + e < k_kept;                                           \
    const uint at = key_pair_index(first_run + (u0) + e, (first) / 2 + t);                         \
    if (KV_F16) k_half[e] = wanted ? k_words[at] : 0u;                                              \
    else k_full[e] = wanted ? k_pairs[at] : uvec2(0);                                               \
  }
#define LOAD_VALUES(first, n, v0)                                                                   \
  [[unroll]] for (uint e = 0; e < V_BATCH; ++e) {                                                   \
    const uint vi = (v0) + e * slices;                                                              \
    v_words[e] = sums_values && vi * VEC < (n) ? v_vec[value_vector_index(kv * v_kept + u, (first), vi)] : uvec4(0); \
  }

void main() {
  const uint split = gl_WorkGroupID.x, kv = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const uint head0 = kv * push.group_size + gl_WorkGroupID.z * GROUP_BLOCK;
  const uint k_kept = HEAD_DIM - push.k_compressed, v_kept = HEAD_DIM - push.v_compressed;
  const uint blocks = (push.num_middle + BLOCK - 1) / BLOCK;
  const uint first_run = kv * k_kept;
  // Step 3's thread: V dim u, and which of `slices` threads sharing it. Neighbouring threads
  // take neighbouring dims of one slice, so they read the same weights (a broadcast).
  const uint slices = WG / v_kept, u = t % v_kept, slice = t / v_kept;
  const bool sums_values = slice < slices;

  for (uint i = t; i < HEAD_DIM * GROUP_BLOCK; i += WG) {
    const uint packed = i / GROUP_BLOCK, b = i % GROUP_BLOCK;
    float value = 0.0;
    if (packed < k_kept) value = KVC_LOAD_ELEMENT(q_words, KV_F16, (head0 + b) * HEAD_DIM + k_dims[kv * HEAD_DIM + push.k_compressed + packed]);
    q_s[i] = value * push.scale;
  }
  barrier();

  float m[GROUP_BLOCK], l[GROUP_BLOCK], acc[GROUP_BLOCK];
  [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {
    m[b] = KVC_NEG_INF;
    l[b] = 0.0;
    acc[b] = 0.0;
  }
  for (uint block = split; block < blocks; block += push.num_splits) {
    const uint first = block * BLOCK, n = min(BLOCK, push.num_middle - first);
    const bool live = 2 * t < n, second_live = 2 * t + 1 < n;  // the thread's tokens in the middle
    // Every load of the block's first batches at once, so that their latencies overlap.
    vec2 spectrum_share[GROUP_BLOCK];
    uint k_half[8];  // K_BATCH of them
    uvec2 k_full[8];
    uvec4 v_words[V_BATCH];
    LOAD_SPECTRUM_SHARE(first, n)
    LOAD_KEYS(first, n, 0u)
    LOAD_VALUES(first, n, slice)

    // 1. Logits of tokens 2t and 2t + 1: W's share and b, plus the packed dims' dot products, a
    // batch of K dims at a time; W takes the whole logits back.
    vec2 logits[GROUP_BLOCK];
    [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) logits[b] = spectrum_share[b] + head_terms[head0 + b];
    for (uint u0 = 0; u0 < k_kept; u0 += K_BATCH) {
      if (u0 > 0) LOAD_KEYS(first, n, u0)
      [[unroll]] for (uint e = 0; e < K_BATCH; ++e) {
        const vec2 k = KV_F16 ? unpackHalf2x16(k_half[e]) : uintBitsToFloat(k_full[e]);
        const uint packed = min(u0 + e, HEAD_DIM - 1);  // past k_kept: k is 0
        [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) logits[b] += q_s[packed * GROUP_BLOCK + b] * k;
      }
    }
    float block_max[GROUP_BLOCK];
    // A last odd token's pair writes one point past the middle too: the middle is at most T
    // (fourier_attention refuses more) and T is even, so an odd middle ends before T and the
    // point is still in the pair's sequence, where nothing reads it.
    if (PAIRED && live) {
      [[unroll]] for (uint b = 0; b < GROUP_BLOCK; b += 2)
        spectrum_quads[spectrum_quad_index(head0 + b, first + 2 * t)] = vec4(logits[b].x, logits[b + 1].x, logits[b].y, logits[b + 1].y);
    }
    [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {
      if (!PAIRED && live) {
        const uint at = spectrum_index(head0 + b, first + 2 * t);
        spectrum[at] = logits[b].x;
        if (second_live) spectrum[at + 2] = logits[b].y;
      }
      block_max[b] = live ? (second_live ? max(logits[b].x, logits[b].y) : logits[b].x) : KVC_NEG_INF;
    }

    // 2. The running maximum (finite: every block has a token), the sums rescaled to it, the weights.
    reduce_heads(block_max, true);
    [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {
      const float m_new = max(m[b], block_max[b]), rescale = exp(m[b] - m_new);
      m[b] = m_new;
      const vec2 weights = vec2(live ? exp(logits[b].x - m_new) : 0.0, second_live ? exp(logits[b].y - m_new) : 0.0);
      l[b] = l[b] * rescale + weights.x + weights.y;
      acc[b] *= rescale;
      weight_s[t * GROUP_BLOCK + b] = weights;
    }
    barrier();

    // 3. The weighted values of dim u: vectors slice, slice + slices, ... of its run in the
    // block, V_BATCH at a time.
    const uint vectors = (n + VEC - 1) / VEC;
    for (uint v0 = slice; sums_values && v0 < vectors; v0 += V_BATCH * slices) {
      if (v0 > slice) LOAD_VALUES(first, n, v0)
      [[unroll]] for (uint e = 0; e < V_BATCH; ++e) {
        const uint vi = v0 + e * slices;
        // The vector's tokens as VEC / 2 pairs; past the middle (memory never written) 0.
        [[unroll]] for (uint p = 0; p < VEC / 2; ++p) {
          const uint token = vi * VEC + 2 * p;
          const vec2 pair = KV_F16 ? unpackHalf2x16(v_words[e][p]) : uintBitsToFloat(uvec2(v_words[e][2 * p], v_words[e][2 * p + 1]));
          const vec2 values = mix(vec2(0.0), pair, bvec2(token < n, token + 1 < n));  // a select: NaN past the middle stays out
          const uint pair_index = min(vi * (VEC / 2) + p, WG - 1);  // past the block: values are 0
          [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) acc[b] += dot(weight_s[pair_index * GROUP_BLOCK + b], values);
        }
      }
    }
    barrier();  // weight_s is read
  }

  reduce_heads(l, false);
  // Per head of the block, the slices' sums of each packed dim, then the partials: 0 at the
  // compressed dims.
  [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) {
    if (sums_values) reduce_s[slice * v_kept + u] = acc[b];
    barrier();
    const uint row = ((head0 + b) * push.partials_per_head + push.first_split + split) * (HEAD_DIM + 2);
    for (uint k = t; k < HEAD_DIM; k += WG) {  // k: the position in v_dims' order
      float sum = 0.0;
      if (k >= push.v_compressed)
        for (uint from = 0; from < slices; ++from) sum += reduce_s[from * v_kept + k - push.v_compressed];
      partials[row + 2 + v_dims[kv * HEAD_DIM + k]] = sum;
    }
    if (t == 0) {
      partials[row] = m[b];
      partials[row + 1] = l[b];
    }
    barrier();  // reduce_s is read
  }
}
