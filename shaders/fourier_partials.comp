#version 450
// FourierAttention decode, factorized route, step 3 (ops/fourier_attention.h): flash-decoding's
// first pass. Workgroup (split, kv head, block of GROUP_BLOCK query heads) takes every
// region_splits-th tile of the full rows (split < full_splits) or of the middle (the others) and
// writes one unnormalised partial per query head (max m, sum l, accumulator) in attention_merge's
// layout. Full rows: q . k and p v over every dim. A middle token: its packed dims' dot plus the
// compressed dims' (F^T a)[t] + b, read from the inverse transform in W, where the whole logit
// is written back in its place (fourier_middle_weights turns it into the transform's input);
// its p v covers the packed dims only (fourier_value_partials adds the compressed ones).
//
// Two passes over the split's tiles: the logits (K tile in shared memory; each thread keeps the
// max of its own), then their weights exp(logit - m) against the split's max, and the value sums
// (V tile): every exponential is taken once and nothing is rescaled. A tile's rows are contiguous
// in memory whatever the packed row length (odd ones included), so a tile is staged by coalesced
// word reads, all issued before any is used; rows are padded to an odd stride, so a thread per
// token reads shared memory without bank conflicts. A split takes every region_splits-th tile,
// as attention_decode does, so the workgroups in flight read neighbouring memory.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // 256 (MAX_WORDS)
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GROUP_BLOCK = 4;  // divides the group: every head of a block is real
layout(constant_id = 3) const bool KV_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Query { uint q_words[]; };        // [num_q_heads][HEAD_DIM]
layout(binding = 1) readonly buffer Keys { uint k_words[]; };         // [num_kv_heads][slot_stride][HEAD_DIM]
layout(binding = 2) readonly buffer Values { uint v_words[]; };
layout(binding = 3) readonly buffer KeyMiddle { uint k_middle[]; };   // [num_kv_heads][middle_stride][HEAD_DIM - k_compressed]
layout(binding = 4) readonly buffer ValueMiddle { uint v_middle[]; };
layout(binding = 5) readonly buffer KeyDims { uint k_dims[]; };       // [num_kv_heads][HEAD_DIM]
layout(binding = 6) readonly buffer ValueDims { uint v_dims[]; };
layout(binding = 7) buffer Spectrum { float spectrum[]; };             // W: [pairs][T][2]; F^T a in, middle logits out
layout(binding = 8) readonly buffer HeadTerms { float head_terms[]; }; // b at [head]
layout(binding = 9) buffer FullLogits { float full_logits[]; };        // [num_q_heads][num_full_slots]
layout(binding = 10) writeonly buffer Partials { float partials[]; };  // [num_q_heads][num_splits][HEAD_DIM + 2]

layout(push_constant) uniform Push {
  uint num_full_slots;
  uint slot_stride;
  uint num_middle;
  uint middle_stride;
  uint k_compressed;
  uint v_compressed;
  uint group_size;
  uint full_splits;
  uint middle_splits;
  uint num_splits;   // partials per query head: these and fourier_value_partials'
  uint full_tile;    // tokens per tile, as the host sizes them (TILE_FLOATS, MAX_TILE)
  uint middle_tile;
  uint window_length;
  float scale;  // 1 / sqrt(HEAD_DIM)
} push;

const uint WG = gl_WorkGroupSize.x;
const uint TILE_FLOATS = 4096;  // one staged tile of K or V rows
const uint MAX_TILE = 128;      // tokens per tile
// Words a thread reads per tile: TILE_FLOATS elements over 256 threads, two a word in f16. A
// tile of rows of odd length k may start mid-word, but holds at most floor(4096 / k) k <= 4095
// elements (k > 1; k = 1 tiles hold 128), so it still spans at most 2048 words. Fewer registers
// in f16 let more workgroups share an SM.
const uint MAX_WORDS = KV_F16 ? 8u : 16u;
const uint SLOTS = WG / GROUP_BLOCK;  // threads per query head in the logit passes

shared float q_s[GROUP_BLOCK * HEAD_DIM];  // in the order of the packed dims, scaled
shared float tile_s[TILE_FLOATS];
shared float weight_s[GROUP_BLOCK * MAX_TILE];
shared float stat_s[2 * GROUP_BLOCK];      // per head of the block: the split's m, then l

// Elements base .. base + count - 1 of WORDS (rows of `kept` elements) into tile_s, row j at j * stride.
// An element's row is found by a float product, not an integer division (tens of instructions
// on a GPU): (i + 0.5) / kept lies at least 0.5 / kept <= 2^-9 from an integer, far more than
// the product's rounding for i < TILE_FLOATS.
#define STAGE_ROWS(WORDS, base, count, kept, stride)                                                     \
  {                                                                                                     \
    const uint per_word = KV_F16 ? 2u : 1u;                                                             \
    const uint first_word = (base) / per_word, end_word = ((base) + (count) + per_word - 1u) / per_word; \
    const float inverse_kept = 1.0 / float(kept);                                                       \
    uint words[MAX_WORDS];                                                                              \
    [[unroll]] for (uint k = 0; k < MAX_WORDS; ++k) {                                                   \
      const uint w = first_word + t + k * WG;                                                           \
      words[k] = w < end_word ? WORDS[w] : 0u;                                                          \
    }                                                                                                   \
    [[unroll]] for (uint k = 0; k < MAX_WORDS; ++k) {                                                   \
      const uint w = first_word + t + k * WG;                                                           \
      [[unroll]] for (uint e = 0; e < per_word; ++e) {                                                  \
        const uint element = w * per_word + e;                                                          \
        if (w < end_word && element >= (base) && element < (base) + (count)) {                          \
          const uint i = element - (base), row = uint((float(i) + 0.5) * inverse_kept);                \
          tile_s[row * (stride) + i - row * (kept)] =                                                   \
              KV_F16 ? unpackHalf2x16(words[k])[e] : uintBitsToFloat(words[k]);                         \
        }                                                                                               \
      }                                                                                                 \
    }                                                                                                   \
  }

// Head g's max (or sum) of `value` over its SLOTS threads, into stat_s[stat + g].
void head_reduce(float value, bool take_max, uint stat) {
  const uint t = gl_LocalInvocationID.x, g = t / SLOTS, slot = t % SLOTS;
  barrier();  // tile_s's last readers are done
  tile_s[t] = value;
  barrier();
  for (uint width = 1; width < SLOTS; width *= 2) {
    if (g < GROUP_BLOCK && slot % (2 * width) == 0 && slot + width < SLOTS)
      tile_s[t] = take_max ? max(tile_s[t], tile_s[t + width]) : tile_s[t] + tile_s[t + width];
    barrier();
  }
  if (g < GROUP_BLOCK && slot == 0) stat_s[stat + g] = tile_s[t];
  barrier();
}

uint spectrum_index(uint head, uint token) { return ((head >> 1) * push.window_length + token) * 2 + (head & 1u); }

void main() {
  const uint split = gl_WorkGroupID.x, kv = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
  const uint head0 = kv * push.group_size + gl_WorkGroupID.z * GROUP_BLOCK;
  const bool full = split < push.full_splits;
  const uint region_split = full ? split : split - push.full_splits;
  const uint region_splits = full ? push.full_splits : push.middle_splits;
  const uint count = full ? push.num_full_slots : push.num_middle, tile = full ? push.full_tile : push.middle_tile;
  const uint k_compressed = full ? 0 : push.k_compressed, v_compressed = full ? 0 : push.v_compressed;
  const uint k_kept = HEAD_DIM - k_compressed, v_kept = HEAD_DIM - v_compressed;
  const uint k_stride = k_kept | 1u, v_stride = v_kept | 1u;
  const uint tiles = (count + tile - 1) / tile;
  const uint g = t / SLOTS, slot = t % SLOTS, head = head0 + g;  // the logit passes' head and token lane

  for (uint e = t; e < GROUP_BLOCK * k_kept; e += WG) {
    const uint block_head = e / k_kept, u = e % k_kept;
    const uint d = full ? u : k_dims[kv * HEAD_DIM + k_compressed + u];
    q_s[block_head * HEAD_DIM + u] = KVC_LOAD_ELEMENT(q_words, KV_F16, (head0 + block_head) * HEAD_DIM + d) * push.scale;
  }

  float m_local = KVC_NEG_INF;
  for (uint ti = region_split; ti < tiles; ti += region_splits) {
    const uint first = ti * tile, n = min(tile, count - first);
    barrier();  // q_s is written; the previous tile's readers are done
    if (full) STAGE_ROWS(k_words, (kv * push.slot_stride + first) * HEAD_DIM, n * HEAD_DIM, HEAD_DIM, k_stride)
    else STAGE_ROWS(k_middle, (kv * push.middle_stride + first) * k_kept, n * k_kept, k_kept, k_stride)
    barrier();
    if (g < GROUP_BLOCK)
      for (uint j = slot; j < n; j += SLOTS) {
        float logit = 0.0;
        for (uint u = 0; u < k_kept; ++u) logit += q_s[g * HEAD_DIM + u] * tile_s[j * k_stride + u];
        if (full) {
          full_logits[head * push.num_full_slots + first + j] = logit;
        } else {
          const uint at = spectrum_index(head, first + j);
          logit += spectrum[at] + head_terms[head];
          spectrum[at] = logit;
        }
        m_local = max(m_local, logit);
      }
  }
  head_reduce(m_local, true, 0);

  // Each thread reads back only the logits it wrote, so no other thread's writes need be visible.
  const float m = g < GROUP_BLOCK ? stat_s[g] : 0.0;
  const uint lanes = WG / v_kept, u = t % v_kept, lane = t / v_kept;
  float l_local = 0.0;
  float acc[KVC_MAX_GROUP_BLOCK];
  [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) acc[b] = 0.0;
  for (uint ti = region_split; ti < tiles; ti += region_splits) {
    const uint first = ti * tile, n = min(tile, count - first);
    barrier();
    if (full) STAGE_ROWS(v_words, (kv * push.slot_stride + first) * HEAD_DIM, n * HEAD_DIM, HEAD_DIM, v_stride)
    else STAGE_ROWS(v_middle, (kv * push.middle_stride + first) * v_kept, n * v_kept, v_kept, v_stride)
    if (g < GROUP_BLOCK)
      for (uint j = slot; j < n; j += SLOTS) {
        const float logit = full ? full_logits[head * push.num_full_slots + first + j] : spectrum[spectrum_index(head, first + j)];
        const float weight = exp(logit - m);
        weight_s[g * MAX_TILE + j] = weight;
        l_local += weight;
      }
    barrier();
    if (lane < lanes)
      for (uint j = lane; j < n; j += lanes) {
        const float v = tile_s[j * v_stride + u];
        [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) acc[b] += weight_s[b * MAX_TILE + j] * v;
      }
  }
  head_reduce(l_local, false, GROUP_BLOCK);

  // The lanes' sums of each packed dim, then the partials: 0 at the compressed dims.
  if (lane < lanes)
    [[unroll]] for (uint b = 0; b < GROUP_BLOCK; ++b) tile_s[(lane * GROUP_BLOCK + b) * v_kept + u] = acc[b];
  barrier();
  for (uint i = t; i < GROUP_BLOCK * HEAD_DIM; i += WG) {
    const uint b = i / HEAD_DIM, k = i % HEAD_DIM;  // k: the position in v_dims' order
    float sum = 0.0;
    if (k >= v_compressed)
      for (uint from = 0; from < lanes; ++from) sum += tile_s[(from * GROUP_BLOCK + b) * v_kept + k - v_compressed];
    const uint d = full ? k : v_dims[kv * HEAD_DIM + k];
    partials[((head0 + b) * push.num_splits + split) * (HEAD_DIM + 2) + 2 + d] = sum;
  }
  if (t < GROUP_BLOCK) {
    const uint base = ((head0 + t) * push.num_splits + split) * (HEAD_DIM + 2);
    partials[base] = stat_s[t];
    partials[base + 1] = stat_s[GROUP_BLOCK + t];
  }
}
