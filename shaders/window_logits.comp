#version 450
// Window scores, step 1: the logits of a kv head's observation rows (group heads x window
// queries) against its prefix slots, as a register-blocked matrix product. A workgroup holds
// a ROW_TILE x SLOT_TILE block of logits, 8 x 8 per thread; queries and keys (rotated to
// their slots' positions as they are read) are staged in shared memory DIM_STEP dimensions at
// a time, so each key is read once for all the rows. 32 layers of the kvc-bench shape are
// 2.7e11 flops: the scalar kernel this replaces (one thread per slot, queries re-read for
// every row) was load-bound at 1.5 ms a layer on the H100.
// The epilogue writes the logits and each row's (max, sum of exp) over the tile, which
// window_softmax merges into the row's softmax statistics (as flash-decoding merges splits).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // THREAD_COLUMNS x THREAD_ROWS = 256 threads
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;
layout(constant_id = 3) const uint ROPE_STYLE = 0;
layout(constant_id = 4) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { float q_rot[]; };  // [window][num_q_heads][HEAD_DIM], scaled
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Positions { int positions[]; };
layout(binding = 3) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 4) writeonly buffer Logits { float logits[]; };   // [num_q_heads][window][num_prefix]
layout(binding = 5) writeonly buffer Partials { vec2 partials[]; };  // [num_q_heads * window][num_tiles]

layout(push_constant) uniform Push {
  uint num_prefix;
  uint slot_stride;
  uint window;
  uint group_size;
  uint num_q_heads;
  uint num_tiles;
} push;

#include "key_chunk.glsl"
#include "window_query.glsl"

// Each thread owns rows {0..3, ROW_TILE/2 + 0..3} + 4 * thread_row and slots {0..3,
// SLOT_TILE/2 + 0..3} + 4 * thread_column: vec4 reads of shared memory, and a subgroup's
// 16 columns read 16 consecutive slot quads (no bank conflicts) and store 256 contiguous bytes.
// Staging: each thread loads one 4-dim chunk of one row (and of one slot) per step, thread t
// row (slot) t / 2, chunk t % 2 of the step; the next step's chunks are loaded into
// registers before the current step is multiplied, so the global loads' latency overlaps it.
const uint THREAD_COLUMNS = 16;
const uint THREAD_ROWS = 16;
const uint ROW_TILE = 8 * THREAD_ROWS;     // = workgroup / 2: one row per thread pair
const uint SLOT_TILE = 8 * THREAD_COLUMNS;  // = workgroup / 2: one slot per thread pair
const uint DIM_STEP = 8;                    // head_dim is a multiple of 8

shared vec4 q_tile[DIM_STEP][ROW_TILE / 4];   // [dim][row quad]
shared vec4 k_tile[DIM_STEP][SLOT_TILE / 4];  // [dim][slot quad]
shared float row_part[ROW_TILE][THREAD_COLUMNS];
shared float row_max[ROW_TILE];

uint tile_row(uint r, uint thread_row) { return (r < 4u ? 0u : ROW_TILE / 2u - 4u) + 4u * thread_row + r; }
uint tile_slot(uint quad, uint e, uint thread_column) { return quad * (SLOT_TILE / 2u) + 4u * thread_column + e; }

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint thread_column = thread % THREAD_COLUMNS, thread_row = thread / THREAD_COLUMNS;
  const uint tile = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y;
  const uint rows_per_kv_head = push.group_size * push.window;
  const uint first_row = gl_WorkGroupID.z * ROW_TILE;  // within the kv head
  const uint first_slot = tile * SLOT_TILE;
  const uint slot_base = kv_head * push.slot_stride;

  const uint half_step = thread % 2u;
  const uint staged_row = first_row + thread / 2u, staged_slot = first_slot + thread / 2u;
  const bool staged_row_valid = staged_row < rows_per_kv_head, staged_slot_valid = staged_slot < push.num_prefix;
  const uint staged_head = kv_head * push.group_size + staged_row / push.window, staged_query = staged_row % push.window;
  const uint staged_position = ROPE_STYLE != 0 && staged_slot_valid ? uint(positions[slot_base + staged_slot]) : 0u;
  vec4 q_next = staged_row_valid ? query_chunk(staged_query, staged_head, half_step) : vec4(0.0);
  vec4 k_next = staged_slot_valid ? key_chunk((slot_base + staged_slot) * HEAD_DIM, 4u * half_step, staged_position) : vec4(0.0);

  vec4 acc[8][2];
  for (uint r = 0; r < 8; ++r) acc[r][0] = acc[r][1] = vec4(0.0);
  for (uint step = 0; step < HEAD_DIM / DIM_STEP; ++step) {
    for (uint e = 0; e < 4; ++e) {
      q_tile[4 * half_step + e][thread / 8u][(thread / 2u) % 4u] = q_next[e];
      k_tile[4 * half_step + e][thread / 8u][(thread / 2u) % 4u] = k_next[e];
    }
    barrier();
    if (step + 1 < HEAD_DIM / DIM_STEP) {
      const uint chunk = (step + 1) * (DIM_STEP / 4u) + half_step;
      if (staged_row_valid) q_next = query_chunk(staged_query, staged_head, chunk);
      if (staged_slot_valid) k_next = key_chunk((slot_base + staged_slot) * HEAD_DIM, 4u * chunk, staged_position);
    }
    for (uint d = 0; d < DIM_STEP; ++d) {
      const vec4 rows_low = q_tile[d][thread_row], rows_high = q_tile[d][THREAD_ROWS + thread_row];
      const vec4 slots_low = k_tile[d][thread_column], slots_high = k_tile[d][THREAD_COLUMNS + thread_column];
      for (uint r = 0; r < 4; ++r) {
        acc[r][0] += rows_low[r] * slots_low;
        acc[r][1] += rows_low[r] * slots_high;
        acc[4 + r][0] += rows_high[r] * slots_low;
        acc[4 + r][1] += rows_high[r] * slots_high;
      }
    }
    barrier();
  }

  // Logits out, and the tile's max per row.
  for (uint r = 0; r < 8; ++r) {
    const uint m = tile_row(r, thread_row);
    const bool row_valid = first_row + m < rows_per_kv_head;
    const uint out_base = (kv_head * rows_per_kv_head + first_row + m) * push.num_prefix;
    float local_max = KVC_NEG_INF;
    for (uint quad = 0; quad < 2; ++quad)
      for (uint e = 0; e < 4; ++e) {
        const uint slot = first_slot + tile_slot(quad, e, thread_column);
        if (slot >= push.num_prefix) continue;
        local_max = max(local_max, acc[r][quad][e]);
        if (row_valid) logits[out_base + slot] = acc[r][quad][e];
      }
    row_part[m][thread_column] = local_max;
  }
  barrier();
  for (uint m = thread; m < ROW_TILE; m += gl_WorkGroupSize.x) {
    float tile_max = KVC_NEG_INF;
    for (uint c = 0; c < THREAD_COLUMNS; ++c) tile_max = max(tile_max, row_part[m][c]);
    row_max[m] = tile_max;
  }
  barrier();
  for (uint r = 0; r < 8; ++r) {
    const uint m = tile_row(r, thread_row);
    float local_sum = 0.0;
    for (uint quad = 0; quad < 2; ++quad)
      for (uint e = 0; e < 4; ++e)
        if (first_slot + tile_slot(quad, e, thread_column) < push.num_prefix) local_sum += exp(acc[r][quad][e] - row_max[m]);
    row_part[m][thread_column] = local_sum;
  }
  barrier();
  for (uint m = thread; m < ROW_TILE; m += gl_WorkGroupSize.x) {
    if (first_row + m >= rows_per_kv_head) continue;
    float tile_sum = 0.0;
    for (uint c = 0; c < THREAD_COLUMNS; ++c) tile_sum += row_part[m][c];
    partials[(kv_head * rows_per_kv_head + first_row + m) * push.num_tiles + tile] = vec2(row_max[m], tile_sum);
  }
}
