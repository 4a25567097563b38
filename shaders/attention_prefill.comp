#version 450
// Causal attention of a chunk of queries over the cache (its own tokens are the last
// num_queries slots), flash-attention-2 style in f32 SIMT. A workgroup owns ROW_TILE rows of
// one kv head (row = query * group_size + head of the group, so each key read serves the
// whole group) and walks that head's keys in tiles of KEY_TILE, up to its last row's own slot.
// Per tile: S = Q K^T as a register-blocked product (ROWS x KEYS logits per thread), queries
// and keys (rotated to their slots' positions as they are read) staged in shared memory
// DIM_STEP dimensions at a time; the online softmax against the tile's row maxima; then
// O += P V with ROWS x 8 dims of O per thread, values staged V_STEP keys at a time. Every
// step's global loads are issued into registers before the current step multiplies (as in
// window_logits), so their latency overlaps the arithmetic. Causal masking is applied only on
// the tiles that cross the block's diagonal. The scalar kernel this replaces (one thread per
// row, one shared read per multiply-add) took 108.9 ms on the kvc-bench prefill row (H100);
// this one 65.8 ms, 18 TFLOPS of the f32 FMA peak's 67 (17.5 ms at peak).
// Writes the output and each row's log-sum-exp (for attention_scores).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // ROW_GROUPS x COLUMNS threads
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint ROPE_STYLE = 0;
layout(constant_id = 4) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { vec4 q_rot[]; };  // [num_queries][num_q_heads][HEAD_DIM / 4], scaled
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Values { uint v_words[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 5) writeonly buffer Out { uint out_words[]; };
layout(binding = 6) writeonly buffer Lse { float lse[]; };  // [num_queries][num_q_heads]

layout(push_constant) uniform Push {
  uint num_slots;
  uint slot_stride;
  uint num_queries;
  uint group_size;
  uint num_q_heads;
} push;

#include "key_chunk.glsl"

// Thread (row_group, column) owns rows row_group + r * ROW_GROUPS (r < ROWS) of the block; of
// S, keys column + j * COLUMNS (j < KEYS) of the tile; of O, dim quads column and COLUMNS +
// column. ROWS and KEYS are fixed: they size register arrays. Threads are numbered in blocks
// of COLUMN_BLOCK columns x all row groups, so a 32-wide subgroup is 4 row groups x 8
// columns: its shared reads are 4 consecutive rows (one per row group, broadcast to the
// columns) and 8 keys or dim quads, each within one 128-byte wavefront. On the H100 row this
// took 65.8 ms against 68.3 ms for a subgroup of 2 row groups x 16 columns with queries and
// keys staged transposed through scalar loads and stores. Measured on that variant (2026-11-23):
// one running O sum instead of two levels 61 ms (fewer registers), 16 dims a step no change,
// 4 row groups (32-row blocks) 88 ms: the block's rows amortise the key and value staging.
const uint WG = gl_WorkGroupSize.x;
const uint ROWS = 8;
const uint KEYS = 4;
const uint CHUNKS = HEAD_DIM / 4;
const uint COLUMNS = HEAD_DIM / 8;
const uint COLUMN_BLOCK = COLUMNS % 8u == 0u ? 8u : COLUMNS;
const uint ROW_GROUPS = WG / COLUMNS;
const uint ROW_TILE = ROWS * ROW_GROUPS;
const uint KEY_TILE = KEYS * COLUMNS;
const uint DIM_STEP = 8;  // head_dim is a multiple of 8
const uint STEP_CHUNKS = DIM_STEP / 4;
const uint S_STEPS = HEAD_DIM / DIM_STEP;
// A stage is DIM_STEP dims of the block's queries ([row][chunk]) and the tile's keys
// ([key][chunk], chunks swapped on every other key quad so 8 consecutive keys fall in
// distinct banks), or V_STEP keys' values ([key][dim quad]), in vec4 items.
const uint Q_ITEMS = ROW_TILE * STEP_CHUNKS;
const uint S_ITEMS = Q_ITEMS + KEY_TILE * STEP_CHUNKS;
// 8 keys of values where they fit the queries' and keys' space and divide the tile, else 4.
const uint V_STEP = COLUMNS % 2u != 0u ? 4u : 8u * CHUNKS <= S_ITEMS ? 8u : 4u;
const uint V_ITEMS = V_STEP * CHUNKS;
const uint STEPS = S_STEPS + KEY_TILE / V_STEP;
const uint ITEMS_PER_THREAD = (S_ITEMS + WG - 1) / WG;
// >= ITEMS_PER_THREAD for every head_dim with the host's row groups: 17 at head_dim 8, where
// each thread stages its own rows' queries; at most 3 from head_dim 56 on.
const uint MAX_ITEMS = 17;
// P is [key][row quad][row group]; a quad is rows r = 4 * quad + 0..3 of a row group. Keys
// are padded by a quad so the 8 columns' stores of consecutive keys hit distinct banks.
const uint P_STRIDE = ROW_TILE / 4 + 1;

shared vec4 stage[2 * S_ITEMS];             // double-buffered: one barrier per step
shared vec4 p_tile[KEY_TILE * P_STRIDE];
shared float row_part[ROW_TILE * COLUMNS];  // [row][column]: partial row maxima, then sums

struct Block {
  uint kv_head;
  uint first_row;  // of the kv head's num_queries * group_size rows
  uint slot_base;  // the kv head's first slot in k, v and positions
  uint keys_end;   // slots the block's last row sees
};

uint key_item(uint key, uint chunk) { return Q_ITEMS + key * STEP_CHUNKS + (chunk ^ ((key / 4u) % STEP_CHUNKS)); }

// Item `item` of step `step` of the tile starting at slot `tile`, as this thread loads it.
vec4 stage_item(Block block, uint tile, uint step, uint item) {
  if (step >= S_STEPS) {
    const uint slot = tile + (step - S_STEPS) * V_STEP + item / CHUNKS;
    if (slot >= block.keys_end) return vec4(0.0);  // zero, not garbage: p = 0 multiplies it
    return KVC_LOAD_VEC4(v_words, KV_F16, (block.slot_base + slot) * HEAD_DIM + 4u * (item % CHUNKS));
  }
  const uint chunk = step * STEP_CHUNKS + item % STEP_CHUNKS;
  if (item < Q_ITEMS) {
    const uint row = block.first_row + item / STEP_CHUNKS;
    if (row >= push.num_queries * push.group_size) return vec4(0.0);
    const uint query = row / push.group_size, head = block.kv_head * push.group_size + row % push.group_size;
    return q_rot[(query * push.num_q_heads + head) * CHUNKS + chunk];
  }
  const uint slot = tile + (item - Q_ITEMS) / STEP_CHUNKS;
  if (slot >= block.keys_end) return vec4(0.0);
  const uint position = ROPE_STYLE != 0 ? uint(positions[block.slot_base + slot]) : 0u;
  return key_chunk((block.slot_base + slot) * HEAD_DIM, 4u * chunk, position);
}

void store_item(uint base, uint step, uint item, vec4 value) {
  if (step >= S_STEPS || item < Q_ITEMS) stage[base + item] = value;
  else stage[base + key_item((item - Q_ITEMS) / STEP_CHUNKS, item % STEP_CHUNKS)] = value;
}

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint in_block = thread % (COLUMN_BLOCK * ROW_GROUPS);
  const uint row_group = in_block / COLUMN_BLOCK;
  const uint column = thread / (COLUMN_BLOCK * ROW_GROUPS) * COLUMN_BLOCK + in_block % COLUMN_BLOCK;
  const uint rows = push.num_queries * push.group_size;
  const uint first_chunk_slot = push.num_slots - push.num_queries;
  Block block;
  block.kv_head = gl_WorkGroupID.y;
  block.first_row = gl_WorkGroupID.x * ROW_TILE;
  block.slot_base = block.kv_head * push.slot_stride;
  block.keys_end = first_chunk_slot + (min(block.first_row + ROW_TILE, rows) - 1u) / push.group_size + 1u;
  // Tiles ending at or below this see no masked slot for any row of the block.
  const uint unmasked_end = first_chunk_slot + block.first_row / push.group_size + 1u;

  vec4 staged[MAX_ITEMS];
  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * WG;
    staged[i] = item < S_ITEMS ? stage_item(block, 0u, 0u, item) : vec4(0.0);
  }

  // O in two levels: each tile's P V is summed on its own and then added to the running
  // (rescaled) sum, so no sum runs over more than a tile or the number of tiles. One running
  // sum over a 9100-slot cache was 2.4e-5 off the double reference (f32 rounding of every
  // add); the tolerance is 1e-5.
  vec4 acc[ROWS][2];
  vec4 tile_acc[ROWS][2];
  float m[ROWS];
  float l[ROWS];  // over this thread's keys only; summed across the columns at the end
  [[unroll]] for (uint r = 0; r < ROWS; ++r) {
    acc[r][0] = acc[r][1] = vec4(0.0);
    m[r] = KVC_NEG_INF;
    l[r] = 0.0;
  }

  uint stage_half = 0;
  for (uint tile = 0; tile < block.keys_end; tile += KEY_TILE) {
    vec4 s[ROWS];  // s[r][j]: row r, key j
    [[unroll]] for (uint r = 0; r < ROWS; ++r) s[r] = vec4(0.0);
    for (uint step = 0; step < STEPS; ++step) {
      const uint base = stage_half * S_ITEMS;
      const uint items = step < S_STEPS ? S_ITEMS : V_ITEMS;
      [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
        const uint item = thread + i * WG;
        if (item < items) store_item(base, step, item, staged[i]);
      }
      barrier();

      const bool tile_done = step + 1u == STEPS;
      const uint next_tile = tile_done ? tile + KEY_TILE : tile, next_step = tile_done ? 0u : step + 1u;
      const uint next_items = next_step < S_STEPS ? S_ITEMS : V_ITEMS;
      if (next_tile < block.keys_end) {
        [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
          const uint item = thread + i * WG;
          if (item < next_items) staged[i] = stage_item(block, next_tile, next_step, item);
        }
      }

      if (step < S_STEPS) {
        [[unroll]] for (uint chunk = 0; chunk < STEP_CHUNKS; ++chunk) {
          vec4 keys[KEYS];
          [[unroll]] for (uint j = 0; j < KEYS; ++j) keys[j] = stage[base + key_item(j * COLUMNS + column, chunk)];
          [[unroll]] for (uint r = 0; r < ROWS; ++r) {
            const vec4 q = stage[base + (r * ROW_GROUPS + row_group) * STEP_CHUNKS + chunk];
            [[unroll]] for (uint e = 0; e < 4; ++e) s[r] += q[e] * vec4(keys[0][e], keys[1][e], keys[2][e], keys[3][e]);
          }
        }
      } else {
        const uint first_key = (step - S_STEPS) * V_STEP;
        [[unroll]] for (uint key = 0; key < V_STEP; ++key) {
          const vec4 p_low = p_tile[(first_key + key) * P_STRIDE + row_group];
          const vec4 p_high = p_tile[(first_key + key) * P_STRIDE + ROW_GROUPS + row_group];
          const vec4 values_low = stage[base + key * CHUNKS + column];
          const vec4 values_high = stage[base + key * CHUNKS + COLUMNS + column];
          [[unroll]] for (uint r = 0; r < 4; ++r) {
            tile_acc[r][0] += p_low[r] * values_low;
            tile_acc[r][1] += p_low[r] * values_high;
            tile_acc[4 + r][0] += p_high[r] * values_low;
            tile_acc[4 + r][1] += p_high[r] * values_high;
          }
        }
      }
      stage_half ^= 1u;
      if (step + 1u == STEPS) {
        [[unroll]] for (uint r = 0; r < ROWS; ++r) {
          acc[r][0] += tile_acc[r][0];
          acc[r][1] += tile_acc[r][1];
        }
      }

      if (step + 1u == S_STEPS) {
        // Online softmax: the rows' maxima over the tile (through shared memory, as the
        // columns of a row need not share a subgroup), one rescale of O per row and tile,
        // then P for the values steps (the next step's barrier publishes it).
        const bool masked = tile + KEY_TILE > unmasked_end;
        [[unroll]] for (uint r = 0; r < ROWS; ++r) {
          if (masked) {
            const uint last_visible = first_chunk_slot + (block.first_row + r * ROW_GROUPS + row_group) / push.group_size;
            [[unroll]] for (uint j = 0; j < KEYS; ++j)
              if (tile + j * COLUMNS + column > last_visible) s[r][j] = KVC_NEG_INF;
          }
          row_part[(r * ROW_GROUPS + row_group) * COLUMNS + column] = max(max(s[r].x, s[r].y), max(s[r].z, s[r].w));
        }
        barrier();
        [[unroll]] for (uint r = 0; r < ROWS; ++r) {
          float tile_max = KVC_NEG_INF;
          [[unroll]] for (uint c = 0; c < COLUMNS; ++c)
            tile_max = max(tile_max, row_part[(r * ROW_GROUPS + row_group) * COLUMNS + c]);
          const float m_new = max(m[r], tile_max);
          const float correction = exp(m[r] - m_new);
          m[r] = m_new;
          acc[r][0] *= correction;
          acc[r][1] *= correction;
          tile_acc[r][0] = tile_acc[r][1] = vec4(0.0);
          s[r] = exp(s[r] - m_new);  // P
          l[r] = l[r] * correction + (s[r].x + s[r].y) + (s[r].z + s[r].w);
        }
        [[unroll]] for (uint j = 0; j < KEYS; ++j)
          [[unroll]] for (uint quad = 0; quad < 2; ++quad)
            p_tile[(j * COLUMNS + column) * P_STRIDE + quad * ROW_GROUPS + row_group] =
                vec4(s[4 * quad][j], s[4 * quad + 1][j], s[4 * quad + 2][j], s[4 * quad + 3][j]);
      }
    }
  }

  // The last reads of row_part were followed by the values steps' barriers.
  [[unroll]] for (uint r = 0; r < ROWS; ++r) row_part[(r * ROW_GROUPS + row_group) * COLUMNS + column] = l[r];
  barrier();
  [[unroll]] for (uint r = 0; r < ROWS; ++r) {
    const uint row = block.first_row + r * ROW_GROUPS + row_group;
    if (row >= rows) continue;
    float total = 0.0;
    [[unroll]] for (uint c = 0; c < COLUMNS; ++c) total += row_part[(r * ROW_GROUPS + row_group) * COLUMNS + c];
    const uint query = row / push.group_size, head = block.kv_head * push.group_size + row % push.group_size;
    const uint out_base = (query * push.num_q_heads + head) * HEAD_DIM;
    [[unroll]] for (uint half_row = 0; half_row < 2; ++half_row) {
      const vec4 o = acc[r][half_row] / total;
      const uint e = out_base + 4u * (half_row * COLUMNS + column);
      if (KV_F16) {
        out_words[e / 2u] = packHalf2x16(o.xy);
        out_words[e / 2u + 1u] = packHalf2x16(o.zw);
      } else {
        out_words[e] = floatBitsToUint(o.x);
        out_words[e + 1u] = floatBitsToUint(o.y);
        out_words[e + 2u] = floatBitsToUint(o.z);
        out_words[e + 3u] = floatBitsToUint(o.w);
      }
    }
    if (column == 0) lse[query * push.num_q_heads + head] = m[r] + log(total);
  }
}
