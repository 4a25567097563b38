// Flash-decoding, pass 1, shared by attention_decode (one cache) and attention_decode_batch
// (many): the split's workgroup reads its share of a kv head's slots once for GROUP_BLOCK query
// heads (GQA) and writes an unnormalised partial (running max m, sum l, accumulator) per query
// head for the merge. A split takes every num_splits-th tile rather than one contiguous range, so
// the workgroups in flight read neighbouring memory, as a copy does: contiguous ranges at
// power-of-two strides ran at under a fifth of the H100's bandwidth. The query is rotated and
// scaled here.
//
// LANES threads share a key, each with 16 bytes of its K and V rows (a warp reads whole rows,
// coalesced; with whole-row NeoX a lane's K bytes are 8 from each half of the row, key_dim); a
// thread owns every KEY_LANES-th key of a tile. All of a tile's K and V loads are issued before
// any is used (PASSES 16-byte loads of each in flight per thread hide DRAM latency), and where
// keys are rotated the next tile's before this tile's work (PREFETCH). The lanes' partial dot products are summed with subgroup XOR shuffles, which
// leave the key's score in every lane, so each thread runs its own online softmax over its keys
// with no shared memory in the loop: one rescale per tile (against the tile's maximum), then
// plain multiply-adds. Shared memory is only the fallback where a subgroup cannot hold a key's
// lanes (lavapipe, head dims whose lane count is not a power of two) and the final combination
// of the key lanes. docs/benchmarks.md has the measurements behind the shape.
//
// The includer declares turns[] (rope_turn_table) and partials[] and names the cache's buffers
// through macros, so that one kernel binds one cache and the other an array of caches:
// KVC_DECODE_QUERY_WORDS (uint, [num_q_heads][HEAD_DIM], before RoPE), KVC_DECODE_KEY_VEC,
// KVC_DECODE_KEY_HALVES and KVC_DECODE_KEY_WORDS (uvec4, uvec2 and uint views of K),
// KVC_DECODE_VALUE_VEC, KVC_DECODE_POSITIONS (int), and KVC_DECODE_STORE_LOGIT(index, value) and
// KVC_DECODE_STORE_LOGIT4(index, vec4) (float and vec4 views of the logits; WRITE_LOGITS only).
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
// Keys are rotated by the built-in cos and sin (rope_cos_sin_builtin) where the device's
// built-ins measured precise (vulkan/trig_precision.h; H100, f16 at 32K: 112 -> 74 us), else by
// the exact polynomial route.
layout(constant_id = 8) const bool BUILTIN_TRIG = false;
const uint TILE = PASSES * KEY_LANES;      // keys per tile
const bool POW2_LANES = (LANES & (LANES - 1)) == 0;
const bool ROTATES_KEYS = ROPE_STYLE != 0 && !KEYS_ROTATED;
const bool PAIRED_KEYS = ROTATES_KEYS && ROPE_STYLE == 1 && ROTARY_DIMS == HEAD_DIM;  // see key_dim
// Where keys are rotated, a tile's work is long enough that its loads no longer hide behind
// other workgroups' work: the next tile's loads are issued before this tile's work (double
// the tile's registers; H100, f16 at 32K: 96 -> 74 us). Without rotation the kernel is at the
// memory floor already and keeps its registers.
const bool PREFETCH = ROTATES_KEYS;

shared float partial_s[GROUP_BLOCK * WG];  // lanes' partial dots when shuffles cannot sum them
shared float score_s[GROUP_BLOCK * KEY_LANES];
shared float red_m[WG];
shared float red_l[WG];
shared vec4 red_acc[2 * WG];

// The cache and split a workgroup decodes, as its kernel found them.
struct DecodeRange {
  uint num_slots;
  uint slot_stride;
  uint split;              // of the cache's num_splits
  uint num_splits;
  uint partials_per_head;  // num_splits, or more where other kernels write the rest of a head's partials
  uint first_partial;      // the cache's first: its query head h, split s is first_partial + h * partials_per_head + s
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

vec2 key_cos_sin(uint position, uvec2 turn) {
  return BUILTIN_TRIG ? rope_cos_sin_builtin(position, turn) : rope_cos_sin(position, turn);
}

// The dim of element e of this lane's chunk of a key (and of the query). With whole-row NeoX
// rotation (PAIRED_KEYS) a lane holds both halves of its rotary pairs: elements 0..VEC/2-1 are
// dims lane * VEC/2 + e, the rest the dims HEAD_DIM/2 further on (two 8-byte loads, each
// still read by its key's lanes as whole 128-byte segments). A key's rotation then needs no other
// lane's elements: the layout where the partner halves sat in lane ^ LANES/2 spent two subgroup
// exchanges per element and pair on them (H100, f16 at 32K: 169 -> 128 us, docs/benchmarks.md).
uint key_dim(uint lane, uint e) {
  if (!PAIRED_KEYS) return lane * VEC + e;
  const uint half_vec = VEC / 2;
  return e < half_vec ? lane * half_vec + e : HEAD_DIM / 2 + lane * half_vec + (e - half_vec);
}

// This lane's 16 bytes of K row `row` (slot_base included), dims key_dim(lane, e).
uvec4 load_key_chunk(uint row, uint lane) {
  if (!PAIRED_KEYS) return KVC_DECODE_KEY_VEC[(row * HEAD_DIM) / VEC + lane];
  const uint row_halves = (row * HEAD_DIM) / (VEC / 2);  // 8-byte units: LANES per half of the row
  return uvec4(KVC_DECODE_KEY_HALVES[row_halves + lane], KVC_DECODE_KEY_HALVES[row_halves + LANES + lane]);
}

void set_chunk_element(inout vec4 lo, inout vec4 hi, uint e, float value) {
  if (e < 4) lo[e] = value;
  else hi[e - 4] = value;
}

// Whether this lane's rotary pairs lie in its own chunk: element pairs (i, i + VEC/2) with
// PAIRED_KEYS, (2i, 2i + 1) interleaved, pair lane * VEC/2 + i either way.
const bool PAIRS_IN_CHUNK = PAIRED_KEYS || ROPE_STYLE == 2;

// The rope_turn_table entries of this lane's rotary pairs (in-chunk pairs: the first VEC/2
// entries) or of its elements' pairs (NeoX over part of the row); unrotated ones 0.
uvec2 lane_turn(uint lane, uint e) {
  if (PAIRS_IN_CHUNK) {
    const uint pair = lane * (VEC / 2) + e;
    return e < VEC / 2 && 2 * pair < ROTARY_DIMS ? turns[pair] : uvec2(0u);
  }
  const uint d = lane * VEC + e, half_dims = ROTARY_DIMS / 2;
  return d < ROTARY_DIMS ? turns[d < half_dims ? d : d - half_dims] : uvec2(0u);
}

// Rotates this lane's chunk of a key (elements lo/hi, dims key_dim(lane, e)) to `position`:
// one cos/sin per pair where the pairs are in the chunk; NeoX over part of the row reads each
// element's partner from memory (row_element: the row's first element).
void rotate_key_chunk(uint row_element, uint lane, uint position, uvec2 turns_of_lane[8], inout vec4 lo, inout vec4 hi) {
  const vec4 lo_in = lo, hi_in = hi;  // partners are read before rotation
  if (PAIRS_IN_CHUNK) {
    [[unroll]] for (uint i = 0; i < VEC / 2; ++i) {
      if (2 * (lane * (VEC / 2) + i) >= ROTARY_DIMS) continue;
      const uint a = PAIRED_KEYS ? i : 2 * i, b = PAIRED_KEYS ? i + VEC / 2 : 2 * i + 1;
      const vec2 rotated = rope_rotate(vec2(chunk_element(lo_in, hi_in, a), chunk_element(lo_in, hi_in, b)),
                                       key_cos_sin(position, turns_of_lane[i]));
      set_chunk_element(lo, hi, a, rotated.x);
      set_chunk_element(lo, hi, b, rotated.y);
    }
    return;
  }
  const uint half_dims = ROTARY_DIMS / 2;
  [[unroll]] for (uint e = 0; e < VEC; ++e) {
    const uint d = lane * VEC + e;
    if (d >= ROTARY_DIMS) continue;
    const bool low = d < half_dims;
    const float partner = KVC_LOAD_ELEMENT(KVC_DECODE_KEY_WORDS, KV_F16, row_element + (low ? d + half_dims : d - half_dims));
    set_chunk_element(lo, hi, e, rope_rotate_element(chunk_element(lo_in, hi_in, e), partner, key_cos_sin(position, turns_of_lane[e]), low));
  }
}

// The query's position: its own slot's, the last of kv head 0, unless the includer says
// otherwise (attention_decode_append, whose query's slot is written in the same dispatch).
#ifndef KVC_DECODE_QUERY_POSITION
#define KVC_DECODE_QUERY_POSITION(range) uint(KVC_DECODE_POSITIONS[(range).num_slots - 1])
#endif

// Element d of query head `head`, rotated to the query's position and scaled.
float query_element(DecodeRange range, uint head, uint d) {
  const uint row = head * HEAD_DIM;
  const float x = KVC_LOAD_ELEMENT(KVC_DECODE_QUERY_WORDS, KV_F16, row + d);
  if (ROPE_STYLE == 0 || d >= ROTARY_DIMS) return x * range.scale;
  const RopeDim at = rope_dim(d);
  const float partner = KVC_LOAD_ELEMENT(KVC_DECODE_QUERY_WORDS, KV_F16, row + at.partner);
  const vec2 cs = rope_cos_sin(KVC_DECODE_QUERY_POSITION(range), turns[at.pair]);
  return rope_rotate_element(x, partner, cs, at.first) * range.scale;
}

// A tile's K and V chunks of this thread, and its keys' positions where keys are rotated: all
// loads issued together (each pass waited on its own position load when they were read where
// used). Passes past the slots load nothing.
void load_tile(uint slot_base, uint tile, uint num_slots, uint key_lane, uint lane, bool has_lane, out uvec4 key_chunks[PASSES],
               out uvec4 value_chunks[PASSES], out uint key_positions[PASSES]) {
  [[unroll]] for (uint pass = 0; pass < PASSES; ++pass) {
    const uint j = pass * KEY_LANES + key_lane;
    const bool valid = has_lane && tile + j < num_slots;
    key_chunks[pass] = valid ? load_key_chunk(slot_base + tile + j, lane) : uvec4(0);
    value_chunks[pass] = valid ? KVC_DECODE_VALUE_VEC[((slot_base + tile + j) * HEAD_DIM) / VEC + lane] : uvec4(0);
    key_positions[pass] = ROTATES_KEYS && valid ? uint(KVC_DECODE_POSITIONS[slot_base + tile + j]) : 0u;
  }
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

  // This thread's chunk of every query head of the block, in registers.
  vec4 q_lo[KVC_MAX_GROUP_BLOCK];
  vec4 q_hi[KVC_MAX_GROUP_BLOCK];
  [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) {
    const uint head = q_head0 + g;
    [[unroll]] for (uint e = 0; e < 4; ++e) {
      q_lo[g][e] = has_lane ? query_element(range, head, key_dim(lane, e)) : 0.0;
      q_hi[g][e] = has_lane && KV_F16 ? query_element(range, head, key_dim(lane, 4 + e)) : 0.0;
    }
  }

  const uint slot_base = kv_head * range.slot_stride;
  // The rotary pairs of this lane's dims are the same for every key: their turns are read once.
  uvec2 turns_of_lane[8];
  [[unroll]] for (uint e = 0; e < VEC; ++e) turns_of_lane[e] = ROTATES_KEYS && has_lane ? lane_turn(lane, e) : uvec2(0u);

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

  uvec4 key_chunks[PASSES];
  uvec4 value_chunks[PASSES];
  uint key_positions[PASSES];
  const uint tile_step = range.num_splits * TILE;
  if (PREFETCH) load_tile(slot_base, split * TILE, range.num_slots, key_lane, lane, has_lane, key_chunks, value_chunks, key_positions);
  for (uint tile = split * TILE; tile < range.num_slots; tile += tile_step) {
    const uint tile_keys = min(TILE, range.num_slots - tile);
    uvec4 next_key_chunks[PASSES];
    uvec4 next_value_chunks[PASSES];
    uint next_key_positions[PASSES];
    if (PREFETCH)
      load_tile(slot_base, tile + tile_step, range.num_slots, key_lane, lane, has_lane, next_key_chunks, next_value_chunks, next_key_positions);
    else
      load_tile(slot_base, tile, range.num_slots, key_lane, lane, has_lane, key_chunks, value_chunks, key_positions);

    float scores[PASSES * KVC_MAX_GROUP_BLOCK];  // [pass][head of the block]
    [[unroll]] for (uint pass = 0; pass < PASSES; ++pass) {
      const uint j = pass * KEY_LANES + key_lane;
      const bool valid = has_lane && j < tile_keys;
      const uint slot = slot_base + tile + j;
      vec4 lo, hi;
      unpack_chunk(key_chunks[pass], lo, hi);
      if (ROTATES_KEYS && valid) rotate_key_chunk(slot * HEAD_DIM, lane, key_positions[pass], turns_of_lane, lo, hi);
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
      // A key's logits of the block's query heads are side by side ([kv head][slot][group]): in
      // fours, one 16-byte store each, so that a warp's keys fill its sectors.
      if (WRITE_LOGITS && valid && lane == 0) {
        const uint first = (kv_head * range.num_slots + tile + j) * range.group_size + (q_head0 - kv_head * range.group_size);
        if (GROUP_BLOCK % 4 == 0) {
          [[unroll]] for (uint g = 0; g < GROUP_BLOCK; g += 4)
            KVC_DECODE_STORE_LOGIT4((first + g) / 4, vec4(dots[g], dots[g + 1], dots[g + 2], dots[g + 3]));
        } else {
          [[unroll]] for (uint g = 0; g < GROUP_BLOCK; ++g) KVC_DECODE_STORE_LOGIT(first + g, dots[g]);
        }
      }
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
    if (PREFETCH) {
      key_chunks = next_key_chunks;
      value_chunks = next_value_chunks;
      key_positions = next_key_positions;
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
      const uint base = (range.first_partial + (q_head0 + g) * range.partials_per_head + split) * (HEAD_DIM + 2);
      if (lane == 0) {
        partials[base] = m_all;
        partials[base + 1] = l_all;
      }
      [[unroll]] for (uint e = 0; e < VEC; ++e) partials[base + 2 + lane * VEC + e] = chunk_element(lo_all, hi_all, e);
    }
    barrier();
  }
}
