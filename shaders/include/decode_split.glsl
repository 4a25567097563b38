// Flash-decoding, pass 1, shared by attention_decode (one cache) and attention_decode_batch
// (many): the split's workgroup reads its share of a kv head's slots once for GROUP_BLOCK query
// heads (GQA) and writes an unnormalised partial (running max m, sum l, accumulator) per query
// head for the merge. A split takes every num_splits-th tile rather than one contiguous range, so
// the workgroups in flight read neighbouring memory, as a copy does: contiguous ranges at
// power-of-two strides ran at under a fifth of the H100's bandwidth. The query is rotated and
// scaled here.
//
// LANES threads share a key, each with one 16-byte chunk of its K and V rows (a warp reads
// whole rows, coalesced); a thread owns every KEY_LANES-th key of a tile. All of a tile's K and
// V loads are issued before any is used (PASSES 16-byte loads of each in flight per thread hide
// DRAM latency). The lanes' partial dot products are summed with subgroup XOR shuffles, which
// leave the key's score in every lane, so each thread runs its own online softmax over its keys
// with no shared memory in the loop: one rescale per tile (against the tile's maximum), then
// plain multiply-adds. Shared memory is only the fallback where a subgroup cannot hold a key's
// lanes (lavapipe, head dims whose lane count is not a power of two) and the final combination
// of the key lanes. docs/benchmarks.md has the measurements behind the shape.
//
// The includer declares turns[] (rope_turn_table) and partials[] and names the cache's buffers
// through macros, so that one kernel binds one cache and the other an array of caches:
// KVC_DECODE_QUERY_WORDS (uint, [num_q_heads][HEAD_DIM], before RoPE), KVC_DECODE_KEY_VEC and
// KVC_DECODE_KEY_WORDS (uvec4 and uint views of K), KVC_DECODE_VALUE_VEC, KVC_DECODE_POSITIONS
// (int) and KVC_DECODE_STORE_LOGIT(index, value) (WRITE_LOGITS only).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GROUP_BLOCK = 4;  // divides the group: every head of a block is real
layout(constant_id = 3) const bool KV_F16 = false;
layout(constant_id = 4) const uint ROPE_STYLE = 0;
layout(constant_id = 5) const uint ROTARY_DIMS = 0;
layout(constant_id = 6) const bool WRITE_LOGITS = false;  // for decode_scores
// Keys stored rotated to their positions (a policy whose positions never change): only the
// query is rotated.
layout(constant_id = 7) const bool KEYS_ROTATED = false;

#include "elements.glsl"
#include "rope.glsl"

const uint WG = gl_WorkGroupSize.x;
const uint VEC = KV_F16 ? 8 : 4;           // elements in 16 bytes
const uint LANES = HEAD_DIM / VEC;         // threads per key
const uint KEY_LANES = WG / LANES;         // keys a pass covers
// K (and V) loads each thread has in flight per tile: 4 ran L = 32K faster on the H100 than 8
// (fewer registers, more workgroups resident) and as fast as 8 at 128K.
const uint PASSES = 4;
const uint TILE = PASSES * KEY_LANES;      // keys per tile
const bool POW2_LANES = (LANES & (LANES - 1)) == 0;
const bool ROTATES_KEYS = ROPE_STYLE != 0 && !KEYS_ROTATED;

shared float partial_s[GROUP_BLOCK * WG];  // lanes' partial dots when shuffles cannot sum them
shared float score_s[GROUP_BLOCK * KEY_LANES];
shared float red_m[WG];
shared float red_l[WG];
shared vec4 red_acc[2 * WG];

// The cache and split a workgroup decodes, as its kernel found them.
struct DecodeRange {
  uint num_slots;
  uint slot_stride;
  uint split;          // of the cache's num_splits
  uint num_splits;
  uint first_partial;  // the cache's first partial: its query head h, split s is first_partial + h * num_splits + s
  uint group_size;     // query heads per kv head
  float scale;         // 1 / sqrt(HEAD_DIM)
};

// 16 bytes of a K or V row as VEC floats (elements 0..3 in lo, 4..7 in hi for f16).
void unpack_chunk(uvec4 words, out vec4 lo, out vec4 hi) {
  if (KV_F16) {
    lo = vec4(unpackHalf2x16(words.x), unpackHalf2x16(words.y));
    hi = vec4(unpackHalf2x16(words.z), unpackHalf2x16(words.w));
  } else {
    lo = uintBitsToFloat(words);
    hi = vec4(0);
  }
}

float chunk_element(vec4 lo, vec4 hi, uint e) { return e < 4 ? lo[e] : hi[e - 4]; }

// The rotary pair of dim d (d < ROTARY_DIMS).
uint rope_pair(uint d) { return ROPE_STYLE == 2 ? d / 2 : (d < ROTARY_DIMS / 2 ? d : d - ROTARY_DIMS / 2); }

// cos and sin, at `position`, of the pairs of this lane's VEC dims from `first` (turns: their
// rope_turn_table entries). With whole-row NeoX (`shared_with_partner`) lanes l and
// l ^ LANES/2 rotate the same pairs: each evaluates half of them and takes the other half from
// its partner lane, so every (key, pair) is evaluated once. In uniform control flow.
void key_cos_sin(uint first, uint position, uvec2 turns_of_lane[8], bool shared_with_partner, out vec2 cos_sin[8]) {
  if (shared_with_partner) {
    const uint half_chunk = VEC / 2;
    const bool upper = (first / VEC & (LANES / 2)) != 0;
    vec2 mine[4], theirs[4];
    [[unroll]] for (uint i = 0; i < half_chunk; ++i) {
      mine[i] = rope_cos_sin(position, turns_of_lane[upper ? half_chunk + i : i]);
      theirs[i] = subgroupShuffleXor(mine[i], LANES / 2);
    }
    [[unroll]] for (uint i = 0; i < half_chunk; ++i) {
      cos_sin[i] = upper ? theirs[i] : mine[i];
      cos_sin[half_chunk + i] = upper ? mine[i] : theirs[i];
    }
    return;
  }
  [[unroll]] for (uint e = 0; e < VEC; ++e)
    cos_sin[e] = first + e < ROTARY_DIMS ? rope_cos_sin(position, turns_of_lane[e]) : vec2(1.0, 0.0);
}

// Rotates the key chunk starting at dim `first` (elements in lo/hi) by `cos_sin`
// (key_cos_sin). For NeoX the partner of dim d is d +- ROTARY_DIMS/2, in another lane's chunk:
// `partners_shuffled` says partner_lo/hi already hold that lane's chunk (whole-row rotation,
// shuffled in); otherwise the partner is read from memory.
void rotate_key_chunk(uint row_element, uint first, bool partners_shuffled, vec4 partner_lo, vec4 partner_hi,
                      vec2 cos_sin[8], inout vec4 lo, inout vec4 hi) {
  const vec4 lo_in = lo, hi_in = hi;  // partners are read before rotation
  [[unroll]] for (uint e = 0; e < VEC; ++e) {
    const uint d = first + e;
    if (d >= ROTARY_DIMS) continue;
    const float x = chunk_element(lo_in, hi_in, e);
    float y;
    if (ROPE_STYLE == 2) {  // interleaved: the partner is the other element of the pair, in this chunk
      const float partner = chunk_element(lo_in, hi_in, e ^ 1u);
      y = rope_rotate_element(x, partner, cos_sin[e], (d & 1u) == 0);
    } else {
      const uint half_dims = ROTARY_DIMS / 2;
      const bool low = d < half_dims;
      const float partner = partners_shuffled
                                ? chunk_element(partner_lo, partner_hi, e)
                                : KVC_LOAD_ELEMENT(KVC_DECODE_KEY_WORDS, KV_F16, row_element + (low ? d + half_dims : d - half_dims));
      y = rope_rotate_element(x, partner, cos_sin[e], low);
    }
    if (e < 4) lo[e] = y;
    else hi[e - 4] = y;
  }
}

// Element d of query head `head`, rotated to the query's position (its own slot's, the last
// of kv head 0) and scaled.
float query_element(DecodeRange range, uint head, uint d) {
  const uint row = head * HEAD_DIM;
  const float x = KVC_LOAD_ELEMENT(KVC_DECODE_QUERY_WORDS, KV_F16, row + d);
  if (ROPE_STYLE == 0 || d >= ROTARY_DIMS) return x * range.scale;
  const uint half_dims = ROTARY_DIMS / 2;
  uint pair, partner_d;
  bool first;
  if (ROPE_STYLE == 2) {
    pair = d / 2;
    partner_d = d ^ 1u;
    first = (d & 1u) == 0;
  } else {
    first = d < half_dims;
    pair = first ? d : d - half_dims;
    partner_d = first ? d + half_dims : d - half_dims;
  }
  const float partner = KVC_LOAD_ELEMENT(KVC_DECODE_QUERY_WORDS, KV_F16, row + partner_d);
  const vec2 cs = rope_cos_sin(uint(KVC_DECODE_POSITIONS[range.num_slots - 1]), turns[pair]);
  return rope_rotate_element(x, partner, cs, first) * range.scale;
}

void decode_split(DecodeRange range) {
  const uint split = range.split;
  const uint kv_head = gl_WorkGroupID.y;
  const uint t = gl_LocalInvocationID.x;
  const uint q_head0 = kv_head * range.group_size + gl_WorkGroupID.z * GROUP_BLOCK;
  const uint lane = t % LANES;
  const uint key_lane = t / LANES;
  const bool has_lane = key_lane < KEY_LANES;
  // Shuffles assume invocation t is lane t % gl_SubgroupSize of its subgroup: Vulkan does not
  // promise it without full subgroups (VK_EXT_subgroup_size_control), but every driver tested
  // (NVIDIA, lavapipe) lays compute invocations out so, and the tests compare with the CPU.
  const bool shuffle_reduce = POW2_LANES && gl_SubgroupSize >= LANES;
  // NeoX over the whole row: dim d's partner d +- HEAD_DIM/2 is in lane ^ LANES/2, same
  // subgroup (with one lane per key, head_dim 8 in f16, it is in the lane's own chunk).
  const bool shuffle_partners = ROTATES_KEYS && ROPE_STYLE == 1 && ROTARY_DIMS == HEAD_DIM && shuffle_reduce && LANES >= 2;

  // This thread's chunk of every query head of the block, in registers.
  vec4 q_lo[KVC_MAX_GROUP_BLOCK];
  vec4 q_hi[KVC_MAX_GROUP_BLOCK];
  [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) {
    const uint head = q_head0 + g, d = lane * VEC;
    [[unroll]] for (uint e = 0; e < 4; ++e) {
      q_lo[g][e] = has_lane ? query_element(range, head, d + e) : 0.0;
      q_hi[g][e] = has_lane && KV_F16 ? query_element(range, head, d + 4 + e) : 0.0;
    }
  }

  const uint slot_base = kv_head * range.slot_stride;
  // The rotary pairs of this lane's dims are the same for every key: their turns are read once.
  uvec2 turns_of_lane[8];
  [[unroll]] for (uint e = 0; e < VEC; ++e) {
    const uint d = lane * VEC + e;
    turns_of_lane[e] = ROTATES_KEYS && has_lane && d < ROTARY_DIMS ? turns[rope_pair(d)] : uvec2(0u);
  }

  float m[KVC_MAX_GROUP_BLOCK];
  float l[KVC_MAX_GROUP_BLOCK];
  vec4 acc_lo[KVC_MAX_GROUP_BLOCK];
  vec4 acc_hi[KVC_MAX_GROUP_BLOCK];
  [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) {
    m[g] = KVC_NEG_INF;
    l[g] = 0.0;
    acc_lo[g] = vec4(0);
    acc_hi[g] = vec4(0);
  }

  for (uint tile = split * TILE; tile < range.num_slots; tile += range.num_splits * TILE) {
    const uint tile_keys = min(TILE, range.num_slots - tile);
    uvec4 key_chunks[PASSES];
    uvec4 value_chunks[PASSES];
    [[unroll]] for (uint pass = 0; pass < PASSES; ++pass) {
      const uint j = pass * KEY_LANES + key_lane;
      const uint chunk = ((slot_base + tile + j) * HEAD_DIM) / VEC + lane;
      key_chunks[pass] = has_lane && j < tile_keys ? KVC_DECODE_KEY_VEC[chunk] : uvec4(0);
      value_chunks[pass] = has_lane && j < tile_keys ? KVC_DECODE_VALUE_VEC[chunk] : uvec4(0);
    }

    float scores[PASSES * KVC_MAX_GROUP_BLOCK];  // [pass][head of the block]
    [[unroll]] for (uint pass = 0; pass < PASSES; ++pass) {
      const uint j = pass * KEY_LANES + key_lane;
      const bool valid = has_lane && j < tile_keys;
      const uint slot = slot_base + tile + j;
      vec4 lo, hi;
      unpack_chunk(key_chunks[pass], lo, hi);
      if (ROTATES_KEYS) {
        vec4 partner_lo = vec4(0), partner_hi = vec4(0);
        if (shuffle_partners) {
          partner_lo = subgroupShuffleXor(lo, LANES / 2);
          partner_hi = subgroupShuffleXor(hi, LANES / 2);
        }
        vec2 cos_sin[8];
        key_cos_sin(lane * VEC, valid ? uint(KVC_DECODE_POSITIONS[slot]) : 0u, turns_of_lane, shuffle_partners, cos_sin);
        if (valid) rotate_key_chunk(slot * HEAD_DIM, lane * VEC, shuffle_partners, partner_lo, partner_hi, cos_sin, lo, hi);
      }
      float dots[KVC_MAX_GROUP_BLOCK];
      [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) dots[g] = dot(lo, q_lo[g]) + dot(hi, q_hi[g]);
      if (shuffle_reduce) {
        [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g)
          [[unroll]] for (uint mask = LANES / 2; mask > 0; mask /= 2) dots[g] += subgroupShuffleXor(dots[g], mask);
      } else {
        // Each (head, key) is summed by one thread (GROUP_BLOCK x KEY_LANES may pass WG: 168 at
        // head_dim 24 in f16, a group of 4); a key's lanes then read the score.
        [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) partial_s[g * WG + t] = dots[g];
        barrier();
        for (uint entry = t; entry < GROUP_BLOCK * KEY_LANES; entry += WG) {
          const uint g = entry / KEY_LANES, key = entry % KEY_LANES;
          float total = 0.0;
          for (uint i = 0; i < LANES; ++i) total += partial_s[g * WG + key * LANES + i];
          score_s[entry] = total;
        }
        barrier();
        [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) dots[g] = has_lane ? score_s[g * KEY_LANES + key_lane] : 0.0;
      }
      [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) scores[pass * KVC_MAX_GROUP_BLOCK + g] = valid ? dots[g] : KVC_NEG_INF;
      if (WRITE_LOGITS && valid && lane == 0)
        [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) KVC_DECODE_STORE_LOGIT((q_head0 + g) * range.num_slots + tile + j, dots[g]);
    }

    // One rescale per head and tile, against the larger of the running and the tile maximum.
    [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) {
      float tile_max = KVC_NEG_INF;
      [[unroll]] for (uint pass = 0; pass < PASSES; ++pass) tile_max = max(tile_max, scores[pass * KVC_MAX_GROUP_BLOCK + g]);
      const float m_new = max(m[g], tile_max);
      const float correction = exp(m[g] - m_new);
      m[g] = m_new;
      l[g] *= correction;
      acc_lo[g] *= correction;
      acc_hi[g] *= correction;
    }
    [[unroll]] for (uint pass = 0; pass < PASSES; ++pass) {
      const bool valid = has_lane && pass * KEY_LANES + key_lane < tile_keys;
      vec4 v_lo, v_hi;
      unpack_chunk(value_chunks[pass], v_lo, v_hi);
      [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) {
        const float p = valid ? exp(scores[pass * KVC_MAX_GROUP_BLOCK + g] - m[g]) : 0.0;
        l[g] += p;
        acc_lo[g] += p * v_lo;
        acc_hi[g] += p * v_hi;
      }
    }
  }

  // The key lanes of each head are combined (max, rescaled sums) and written as the split's partial.
  [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) {
    red_m[t] = m[g];
    red_l[t] = l[g];
    red_acc[2 * t] = acc_lo[g];
    red_acc[2 * t + 1] = acc_hi[g];
    barrier();
    if (key_lane == 0) {
      float m_all = KVC_NEG_INF;
      for (uint k = 0; k < KEY_LANES; ++k) m_all = max(m_all, red_m[k * LANES + lane]);
      float l_all = 0.0;
      vec4 lo_all = vec4(0), hi_all = vec4(0);
      for (uint k = 0; k < KEY_LANES; ++k) {
        const uint from = k * LANES + lane;
        const float w = exp(red_m[from] - m_all);
        l_all += red_l[from] * w;
        lo_all += red_acc[2 * from] * w;
        hi_all += red_acc[2 * from + 1] * w;
      }
      const uint base = (range.first_partial + (q_head0 + g) * range.num_splits + split) * (HEAD_DIM + 2);
      if (lane == 0) {
        partials[base] = m_all;
        partials[base + 1] = l_all;
      }
      [[unroll]] for (uint e = 0; e < VEC; ++e) partials[base + 2 + lane * VEC + e] = chunk_element(lo_all, hi_all, e);
    }
    barrier();
  }
}
