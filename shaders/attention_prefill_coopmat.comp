#version 450
// Causal attention of a chunk of queries over the cache on cooperative matrices
// (VK_KHR_cooperative_matrix: tensor cores on NVIDIA, AMD RDNA3, Intel Arc), flash-attention-2
// style: f16 operands, f32 accumulation, online softmax. The twin of attention_prefill.comp
// (f32 SIMT, every device), with the same rows, causal rule and outputs; the host takes this
// kernel for f16 caches on devices that list a 16x16x16 f16 x f16 -> f32 subgroup shape.
//
// A workgroup owns ROW_TILE rows of one kv head (row = query * group_size + head of the group,
// so each key read serves the whole group); each of its subgroups owns 16 of them, keeps their
// queries as A matrices and their O (16 x HEAD_DIM, f32) as accumulators for the whole walk.
// Per tile of KEY_TILE keys, staged (f16) by the whole workgroup in shared memory, S = Q K^T
// (accumulators), the online softmax, and O = O * C + P V, where C holds each row's rescale
// factor. The softmax takes one of two routes (SOFTMAX_IN_REGISTERS, which the host sets where
// the device's fragments are QuadRows, vulkan/fragment_layout.h):
// - in registers: each lane works on its own accumulator elements, whose rows the layout
//   names (a row's maximum and sum gather over a quad of lanes); P's elements are S's, so P
//   becomes the A matrix element by element, and the factors scale O's elements directly.
// - through shared memory (any device): S goes to the subgroup's scratch, a lane pair per row
//   takes it back, and P (f16) and the factors return there, C being an accumulator whose row r
//   holds row r's factor: the extension gives no access to an element's row, but a
//   component-wise product with a matrix of the same type does, since both place element
//   (r, c) alike.
// The factors are skipped when no row's maximum moved. Tiles past a subgroup's last visible
// slot are skipped; the causal test runs only on tiles that cross its diagonal.
// With RoPE, keys are either read pre-rotated (f16 rows the rope op wrote once per call, at
// key_slot_stride; the host's default) or rotated as they are staged (ROPE_STYLE != 0: a
// cos/sin pair per key element per workgroup, which measured slower; KVC_COOPMAT_ROPE=load
// selects it so that the two can be measured against each other).
// Queries arrive rotated and scaled by 1/sqrt(head_dim) (q_rot, shared with attention_scores);
// the scale is taken back out before rounding to f16, so an unrotated f16 query stays exact,
// and applied to S in f32 with log2(e): the softmax runs in base 2 (exp2 of the scaled logit
// less the row's maximum, the maxima in base-2 units; H100, 2048 over 32K, against exp of the
// natural-unit logit: 5.72 -> 5.48 ms in one call, 5.71 -> 5.60 in another), and the
// log-sum-exp leaves in natural units.
// Writes the output and each row's log-sum-exp (for attention_scores).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require

layout(local_size_x_id = 0) in;  // SUBGROUPS x SUBGROUP_SIZE threads
layout(constant_id = 1) const uint HEAD_DIM = 128;   // a multiple of 16, <= 128
layout(constant_id = 2) const uint ROPE_STYLE = 0;  // rotate keys as they are staged (rope.glsl)
layout(constant_id = 3) const uint ROTARY_DIMS = 0;
layout(constant_id = 4) const bool SOFTMAX_IN_REGISTERS = false;  // the device's fragments are QuadRows
layout(constant_id = 5) const uint KEY_TILE = 32;  // keys a tile: 32, or 64 with the softmax in registers

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { vec4 q_rot[]; };  // [num_queries][num_q_heads][HEAD_DIM / 4], scaled
layout(binding = 1) readonly buffer Keys { uvec4 k_halves[]; };  // f16: [kv][key_slot_stride][HEAD_DIM / 8]
layout(binding = 1) readonly buffer KeyWords { uint k_words[]; };   // the f16 keys as key_chunk reads them
layout(binding = 2) readonly buffer Values { uvec4 v_halves[]; };  // f16: [kv][slot_stride][HEAD_DIM / 8]
layout(binding = 3) writeonly buffer Out { uvec4 out_halves[]; };  // f16: [num_queries][num_q_heads][HEAD_DIM / 8]
layout(binding = 4) writeonly buffer Lse { float lse[]; };          // [num_queries][num_q_heads]
layout(binding = 5) readonly buffer Positions { int positions[]; };  // [kv][slot_stride]; ROPE_STYLE only
layout(binding = 6) readonly buffer Turns { uvec2 turns[]; };

layout(push_constant) uniform Push {
  uint num_slots;
  uint key_slot_stride;  // slots per kv head in the keys binding
  uint slot_stride;      // in the values binding
  uint num_queries;
  uint group_size;
  uint num_q_heads;
} push;

const bool KV_F16 = true;  // key_chunk's stored dtype: this kernel takes f16 caches only
#include "key_chunk.glsl"

// The host takes this kernel only where subgroups are 32 wide: a lane pair per row of 16 through
// shared memory, a quad of lanes per two rows in QuadRows fragments.
const uint SUBGROUP_SIZE = 32;
const uint SUBGROUPS = gl_WorkGroupSize.x / SUBGROUP_SIZE;
const uint MAT = 16;  // M = N = K of every matrix product
const uint ROW_TILE = SUBGROUPS * MAT;
const uint KEY_BLOCKS = KEY_TILE / MAT;
const uint DIM_BLOCKS = HEAD_DIM / MAT;
const uint MAX_DIM_BLOCKS = 8;  // register arrays are sized by fixed bounds (elements.glsl)
const uint MAX_KEY_BLOCKS = 4;
const uint ROW_OCTETS = HEAD_DIM / 8;  // a row in uvec4 items of 8 halves

// Shared memory in uvec4 items (16 bytes: cooperative-matrix loads and stores want pointers
// and strides in multiples of 16 bytes). Tiles are [key][dim] f16 rows padded by one item so
// that consecutive rows start in different banks.
const uint TILE_STRIDE = ROW_OCTETS + 1;
const uint TILE_ITEMS = KEY_TILE * TILE_STRIDE;
// A subgroup's scratch holds, in turn: its S (16 x KEY_TILE f32, rows padded by one item);
// then P (16 x KEY_TILE f16, padded) beside C (16 x 16 f32); at the start a 16 x 16 f16 block
// of its queries, at the end a 16 x 16 f32 block of O beside C. With the softmax in registers
// only the queries and O pass through it.
const uint S_STRIDE = KEY_TILE / 4 + 1;
const uint P_STRIDE = KEY_TILE / 8 + 1;
const uint C_STRIDE = MAT / 4;
const uint C_BASE = MAT * P_STRIDE;
const uint Q_STRIDE = MAT / 8;
const uint O_STRIDE = MAT / 4;
// Through shared memory S's MAT * S_STRIDE >= C_BASE + MAT * C_STRIDE, O's MAT * O_STRIDE and the
// queries' MAT * Q_STRIDE; in registers O's is the larger.
const uint SCRATCH_ITEMS = SOFTMAX_IN_REGISTERS ? MAT * O_STRIDE : MAT * S_STRIDE;
// Staging: each thread carries up to MAX_ITEMS items of K and of V from global memory to the
// tiles (the host's smallest workgroup, 4 subgroups at head_dim 128 with 64-key tiles, needs 8).
const uint ITEMS = KEY_TILE * ROW_OCTETS;
const uint ITEMS_PER_THREAD = (ITEMS + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;
const uint MAX_ITEMS = 8;

shared uvec4 key_tile[TILE_ITEMS];
shared uvec4 value_tile[TILE_ITEMS];
shared uvec4 scratch[SUBGROUPS * SCRATCH_ITEMS];

#define ACC coopmat<float, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseAccumulator>
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseB>

uvec4 pack_halves(vec4 low, vec4 high) {
  return uvec4(packHalf2x16(low.xy), packHalf2x16(low.zw), packHalf2x16(high.xy), packHalf2x16(high.zw));
}

// Item `item` ([key][octet]) of the key or value tile starting at slot `tile`; zero past the
// block's last visible slot, so that the rows of a partial tile hold no cache slack (NaN in
// the tests) for P = 0 to multiply.
uvec4 key_item(uint kv_head, uint tile, uint keys_end, uint item) {
  const uint slot = tile + item / ROW_OCTETS, octet = item % ROW_OCTETS;
  if (slot >= keys_end) return uvec4(0u);
  const uint row = kv_head * push.key_slot_stride + slot;
  if (ROPE_STYLE != 0) {
    const uint position = uint(positions[kv_head * push.slot_stride + slot]);
    return pack_halves(key_chunk(row * HEAD_DIM, 8u * octet, position), key_chunk(row * HEAD_DIM, 8u * octet + 4u, position));
  }
  return k_halves[row * ROW_OCTETS + octet];
}

uvec4 value_item(uint kv_head, uint tile, uint keys_end, uint item) {
  const uint slot = tile + item / ROW_OCTETS, octet = item % ROW_OCTETS;
  if (slot >= keys_end) return uvec4(0u);
  return v_halves[(kv_head * push.slot_stride + slot) * ROW_OCTETS + octet];
}

#include "quad_rows.glsl"

// The largest over a quad of lanes (a QuadRows row's holders).
vec2 quad_max(vec2 value) {
  value = max(value, subgroupShuffleXor(value, 1u));
  return max(value, subgroupShuffleXor(value, 2u));
}

vec2 quad_sum(vec2 value) {
  value += subgroupShuffleXor(value, 1u);
  return value + subgroupShuffleXor(value, 2u);
}

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint subgroup = gl_SubgroupID;
  const uint lane = gl_SubgroupInvocationID;
  // Shared-memory softmax and output lanes: lane pair (2r, 2r + 1) holds row r of the
  // subgroup's 16, each half of the keys (or of a 16-dim block).
  const uint lane_row = lane >> 1, lane_half = lane & 1u;
  const uint kv_head = gl_WorkGroupID.y;
  const uint rows = push.num_queries * push.group_size;
  const uint first_chunk_slot = push.num_slots - push.num_queries;
  const uint block_first_row = gl_WorkGroupID.x * ROW_TILE;
  // Slots the block's last row sees: the tiles run up to here.
  const uint keys_end = first_chunk_slot + (min(block_first_row + ROW_TILE, rows) - 1u) / push.group_size + 1u;
  const uint sub_first_row = block_first_row + subgroup * MAT;
  // Tiles at or past this are masked for every row of the subgroup; tiles ending at or below
  // sub_unmasked_end are visible to all of them.
  // A subgroup with no real row (the block's padding) computes nothing.
  const uint sub_keys_end =
      sub_first_row < rows ? first_chunk_slot + (min(sub_first_row + MAT, rows) - 1u) / push.group_size + 1u : 0u;
  const uint sub_unmasked_end = first_chunk_slot + sub_first_row / push.group_size + 1u;
  const uint row = sub_first_row + lane_row;  // this lane's row (shared-memory softmax, output)
  const bool row_real = row < rows;
  const uint query = row / push.group_size, head = kv_head * push.group_size + row % push.group_size;
  const uint last_visible = first_chunk_slot + query;
  // The two rows a lane holds in QuadRows fragments (softmax in registers).
  const uvec2 quad_rows = uvec2(sub_first_row + (lane >> 2)) + uvec2(0u, 8u);
  const uvec2 quad_last_visible = uvec2(first_chunk_slot) + quad_rows / push.group_size;
  const uint scratch_base = subgroup * SCRATCH_ITEMS;
  const float scale = inversesqrt(float(HEAD_DIM));
  const float scale_log2 = scale * 1.4426950408889634;  // log2(e) / sqrt(HEAD_DIM)
  const float LN2 = 0.6931471805599453;

  // The subgroup's queries as A matrices, 16 dims at a time through its scratch.
  MAT_A q_frag[MAX_DIM_BLOCKS];
  [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) {
    uvec4 halves = uvec4(0u);
    if (row_real) {
      const uint quad = (query * push.num_q_heads + head) * (HEAD_DIM / 4) + block * 4u + lane_half * 2u;
      halves = pack_halves(q_rot[quad] / scale, q_rot[quad + 1u] / scale);
    }
    scratch[scratch_base + lane_row * Q_STRIDE + lane_half] = halves;
    subgroupBarrier();
    coopMatLoad(q_frag[block], scratch, scratch_base, Q_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    subgroupBarrier();
  }

  ACC o_acc[MAX_DIM_BLOCKS];
  [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) o_acc[block] = ACC(0.0);
  // Row maxima of the base-2 scaled logits so far and this lane's share of the rows' sums of
  // exp2(logit - max): through shared memory its lane pair's row (in .x; the maximum is the
  // pair's, the sum this lane's half), in registers its two QuadRows rows.
  vec2 m = vec2(KVC_NEG_INF);
  vec2 l = vec2(0.0);

  uvec4 staged_keys[MAX_ITEMS], staged_values[MAX_ITEMS];
  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * gl_WorkGroupSize.x;
    staged_keys[i] = item < ITEMS ? key_item(kv_head, 0u, keys_end, item) : uvec4(0u);
    staged_values[i] = item < ITEMS ? value_item(kv_head, 0u, keys_end, item) : uvec4(0u);
  }

  for (uint tile = 0; tile < keys_end; tile += KEY_TILE) {
    [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
      const uint item = thread + i * gl_WorkGroupSize.x;
      if (item < ITEMS) {
        const uint at = (item / ROW_OCTETS) * TILE_STRIDE + item % ROW_OCTETS;
        key_tile[at] = staged_keys[i];
        value_tile[at] = staged_values[i];
      }
    }
    barrier();
    // The next tile's loads are in flight while this one multiplies.
    const uint next_tile = tile + KEY_TILE;
    if (next_tile < keys_end) {
      [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
        const uint item = thread + i * gl_WorkGroupSize.x;
        if (item < ITEMS) {
          staged_keys[i] = key_item(kv_head, next_tile, keys_end, item);
          staged_values[i] = value_item(kv_head, next_tile, keys_end, item);
        }
      }
    }

    if (tile < sub_keys_end) {  // uniform per subgroup
      ACC s_acc[MAX_KEY_BLOCKS];
      [[unroll]] for (uint kb = 0; kb < KEY_BLOCKS; ++kb) {
        s_acc[kb] = ACC(0.0);
        [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) {
          // K^T as B: element (dim, key) sits at key * TILE_STRIDE + dim, column-major.
          MAT_B k_frag;
          coopMatLoad(k_frag, key_tile, kb * MAT * TILE_STRIDE + block * 2u, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
          s_acc[kb] = coopMatMulAdd(q_frag[block], k_frag, s_acc[kb]);
        }
      }
      const bool diagonal = tile + KEY_TILE > sub_unmasked_end;
      MAT_A p_frag[MAX_KEY_BLOCKS];
      if (SOFTMAX_IN_REGISTERS) {
        vec2 tile_max = vec2(KVC_NEG_INF);
        [[unroll]] for (uint kb = 0; kb < KEY_BLOCKS; ++kb) {
          [[unroll]] for (uint i = 0; i < FRAGMENT; ++i) {
            float s = s_acc[kb][i] * scale_log2;
            if (diagonal && tile + kb * MAT + fragment_column(lane, i) > quad_last_visible[fragment_half(i)]) s = KVC_NEG_INF;
            s_acc[kb][i] = s;
            tile_max[fragment_half(i)] = max(tile_max[fragment_half(i)], s);
          }
        }
        const vec2 m_new = max(m, quad_max(tile_max));
        const vec2 correction = exp2(m - m_new);
        const bool rescale = subgroupAny(any(greaterThan(m_new, m)));
        m = m_new;
        vec2 p_sum = vec2(0.0);
        [[unroll]] for (uint kb = 0; kb < KEY_BLOCKS; ++kb) {
          [[unroll]] for (uint i = 0; i < FRAGMENT; ++i) {
            const float p = exp2(s_acc[kb][i] - m_new[fragment_half(i)]);
            p_sum[fragment_half(i)] += p;
            p_frag[kb][i] = float16_t(p);
          }
        }
        l = l * correction + p_sum;
        if (rescale) {
          [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block)
            [[unroll]] for (uint i = 0; i < FRAGMENT; ++i) o_acc[block][i] *= correction[fragment_half(i)];
        }
      } else {
        [[unroll]] for (uint kb = 0; kb < KEY_BLOCKS; ++kb)
          coopMatStore(s_acc[kb], scratch, scratch_base + kb * (MAT / 4), S_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
        subgroupBarrier();
        // This lane's KEY_TILE / 2 keys of its row, the row maximum across the lane pair.
        const uint keys_per_lane = KEY_TILE / 2u;
        float s[2 * MAT];
        [[unroll]] for (uint quad = 0; quad < keys_per_lane / 4u; ++quad) {
          const vec4 four = uintBitsToFloat(scratch[scratch_base + lane_row * S_STRIDE + lane_half * (keys_per_lane / 4u) + quad]);
          [[unroll]] for (uint e = 0; e < 4; ++e) s[quad * 4 + e] = four[e] * scale_log2;
        }
        if (diagonal) {
          [[unroll]] for (uint j = 0; j < keys_per_lane; ++j)
            if (tile + lane_half * keys_per_lane + j > last_visible) s[j] = KVC_NEG_INF;
        }
        float tile_max = s[0];
        [[unroll]] for (uint j = 1; j < keys_per_lane; ++j) tile_max = max(tile_max, s[j]);
        tile_max = max(tile_max, subgroupShuffleXor(tile_max, 1u));
        const float m_new = max(m.x, tile_max);
        const float correction = exp2(m.x - m_new);
        const bool rescale = subgroupAny(m_new > m.x);
        m.x = m_new;
        float p_sum = 0.0;
        [[unroll]] for (uint j = 0; j < keys_per_lane; ++j) {
          s[j] = exp2(s[j] - m_new);  // P
          p_sum += s[j];
        }
        l.x = l.x * correction + p_sum;
        subgroupBarrier();  // every lane has read S: P and C may overwrite it

        [[unroll]] for (uint octet = 0; octet < keys_per_lane / 8u; ++octet)
          scratch[scratch_base + lane_row * P_STRIDE + lane_half * (keys_per_lane / 8u) + octet] =
              pack_halves(vec4(s[octet * 8], s[octet * 8 + 1], s[octet * 8 + 2], s[octet * 8 + 3]),
                          vec4(s[octet * 8 + 4], s[octet * 8 + 5], s[octet * 8 + 6], s[octet * 8 + 7]));
        if (rescale) {
          const uvec4 factors = floatBitsToUint(vec4(correction));
          scratch[scratch_base + C_BASE + lane_row * C_STRIDE + lane_half * 2u] = factors;
          scratch[scratch_base + C_BASE + lane_row * C_STRIDE + lane_half * 2u + 1u] = factors;
        }
        subgroupBarrier();

        if (rescale) {
          ACC c_mat;
          coopMatLoad(c_mat, scratch, scratch_base + C_BASE, C_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
          [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) o_acc[block] = o_acc[block] * c_mat;
        }
        [[unroll]] for (uint kb = 0; kb < KEY_BLOCKS; ++kb)
          coopMatLoad(p_frag[kb], scratch, scratch_base + kb * (MAT / 8), P_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
      }
      [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) {
        [[unroll]] for (uint kb = 0; kb < KEY_BLOCKS; ++kb) {
          // V as B: element (key, dim) sits at key * TILE_STRIDE + dim, row-major.
          MAT_B v_frag;
          coopMatLoad(v_frag, value_tile, kb * MAT * TILE_STRIDE + block * 2u, TILE_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
          o_acc[block] = coopMatMulAdd(p_frag[kb], v_frag, o_acc[block]);
        }
      }
      if (!SOFTMAX_IN_REGISTERS) subgroupBarrier();  // P and C are read before the next tile's S overwrites them
    }
    barrier();  // the tiles are read before the next ones overwrite them
  }

  // O / l, then O leaves 16 dims at a time through the scratch. Through shared memory C holds
  // 1 / l per row (O at the scratch's start, C after P's place, so the two never overlap).
  if (SOFTMAX_IN_REGISTERS) {
    const vec2 total = quad_sum(l);
    [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block)
      [[unroll]] for (uint i = 0; i < FRAGMENT; ++i) o_acc[block][i] /= total[fragment_half(i)];
    if ((lane & 3u) == 0u) {
      [[unroll]] for (uint half_index = 0; half_index < 2; ++half_index) {
        const uint quad_row = quad_rows[half_index];
        if (quad_row < rows)
          lse[(quad_row / push.group_size) * push.num_q_heads + kv_head * push.group_size + quad_row % push.group_size] =
              m[half_index] * LN2 + log(total[half_index]);
      }
    }
  } else {
    const float total = l.x + subgroupShuffleXor(l.x, 1u);
    const uvec4 inverse = floatBitsToUint(vec4(1.0 / total));
    scratch[scratch_base + C_BASE + lane_row * C_STRIDE + lane_half * 2u] = inverse;
    scratch[scratch_base + C_BASE + lane_row * C_STRIDE + lane_half * 2u + 1u] = inverse;
    subgroupBarrier();
    ACC c_mat;
    coopMatLoad(c_mat, scratch, scratch_base + C_BASE, C_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) o_acc[block] = o_acc[block] * c_mat;
    if (row_real && lane_half == 0u) lse[query * push.num_q_heads + head] = m.x * LN2 + log(total);
  }
  [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) {
    coopMatStore(o_acc[block], scratch, scratch_base, O_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    subgroupBarrier();
    if (row_real) {
      const uint at = scratch_base + lane_row * O_STRIDE + lane_half * 2u;
      out_halves[((query * push.num_q_heads + head) * HEAD_DIM + block * MAT + lane_half * 8u) / 8u] =
          pack_halves(uintBitsToFloat(scratch[at]), uintBitsToFloat(scratch[at + 1u]));
    }
    subgroupBarrier();
  }
}
