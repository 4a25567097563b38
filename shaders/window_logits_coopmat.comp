#version 450
// Window scores, step 1 on cooperative matrices (VK_KHR_cooperative_matrix: tensor cores): the
// twin of window_logits.comp (f32 SIMT, every device), the logits of a kv head's observation
// rows (group heads x window queries) against the prefix slots, and each row's (max, sum of
// exp) over the workgroup's slots for window_softmax. The host takes it for f16 caches on
// devices that list a 16x16x16 f16 x f16 -> f32 subgroup shape, with 32-lane subgroups.
//
// A workgroup owns ROW_TILE rows of one kv head (all of them at the kvc-bench shape, 4 heads x
// 32 queries, so each key is read once) and a run of steps_per_group slot steps of SLOT_STEP
// slots; each subgroup owns 16 rows, makes their queries A matrices once and keeps them for the
// whole run (a workgroup per 128-slot tile spent most of its life building them), and per step
// computes S = Q K^T for the step's slots, 32 at a time. A step's keys are staged in shared
// memory; the next step's are loaded into registers while the product runs. With RoPE the keys
// come rotated (f16) from the rope op (rotate_keys): rotating them as they are staged cost each
// pass a cos/sin pair per key element. One (max, sum) partial per row and workgroup:
// push.num_tiles is the grid's x.
// Queries arrive rotated and scaled by 1/sqrt(head_dim) (q_rot, from the rope op); the scale is
// taken out before rounding to f16, so an unrotated f16 query stays exact, and applied to S in
// f32, as attention_prefill_coopmat.comp does.
// The rows' work (logits out, statistics, a slot's probabilities summed over the rows) takes
// one of two routes:
// - through shared memory (any device): the accumulators go to the subgroup's scratch 32 slots
//   at a time; then each store instruction writes 32 consecutive floats of one row (a 128-byte
//   line), and a lane pair takes each row's statistics.
// - in registers (ROWS_IN_REGISTERS, which the host sets where the device's fragments are
//   QuadRows, vulkan/fragment_layout.h, and no logits are written: from registers they would
//   leave in 32-byte pieces of 8 rows): each lane works on its own accumulator elements, whose
//   rows and slots the layout names; a row's statistics gather over its quad of lanes once, at
//   the run's end, and a slot's sum over the lanes that hold its column.
// coopMatStore straight to the logits would need num_prefix a multiple of 4 (the 16-byte
// alignment of pointer and stride) and could not stop at the prefix's or the rows' end.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require

layout(local_size_x_id = 0) in;  // SUBGROUPS x SUBGROUP_SIZE threads
layout(constant_id = 1) const uint HEAD_DIM = 128;  // a multiple of 16, <= 128
// What the kernel writes: the logits and the rows' partials; the partials alone (the first of
// two passes, for indicators that need no logits); or, given the rows' statistics, each slot's
// probabilities summed over the workgroup's rows (the second pass: SnapKV's vote without the
// logits' 128 MiB written and read back). The host takes OUTPUT_SUMS only where a kv head's rows
// are one row tile (one workgroup along z): a second would overwrite the sums.
const uint OUTPUT_LOGITS = 0, OUTPUT_STATISTICS = 1, OUTPUT_SUMS = 2;
layout(constant_id = 2) const uint OUTPUT = OUTPUT_LOGITS;
layout(constant_id = 3) const bool ROWS_IN_REGISTERS = false;  // QuadRows fragments, OUTPUT is not OUTPUT_LOGITS

#include "elements.glsl"

layout(binding = 0) readonly buffer Query { vec4 q_rot[]; };  // [window][num_q_heads][HEAD_DIM / 4], scaled
layout(binding = 1) readonly buffer Keys { uvec4 k_halves[]; };  // f16, rotated if RoPE applies: [kv][slot_stride][HEAD_DIM / 8]
layout(binding = 2) writeonly buffer Logits { float logits[]; };    // [num_q_heads][window][num_prefix]
layout(binding = 2) writeonly buffer Sums { float sums[]; };        // OUTPUT_SUMS: [num_kv_heads][num_prefix]
layout(binding = 3) writeonly buffer Partials { vec2 partials[]; };  // [num_q_heads * window][num_tiles]
layout(binding = 3) readonly buffer RowStats { vec2 row_stats[]; };  // OUTPUT_SUMS: [num_q_heads * window] (max, 1 / sum)

layout(push_constant) uniform Push {
  uint num_prefix;
  uint slot_stride;
  uint window;
  uint group_size;
  uint num_q_heads;
  uint num_tiles;  // partials per row: the workgroups along x
  uint steps_per_group;
} push;

// The host takes this kernel only where subgroups are 32 wide: a lane pair per row of 16 through
// shared memory, a quad of lanes per two rows in QuadRows fragments.
const uint SUBGROUP_SIZE = 32;
const uint SUBGROUPS = gl_WorkGroupSize.x / SUBGROUP_SIZE;
const uint MAT = 16;  // M = N = K of every matrix product
const uint ROW_TILE = SUBGROUPS * MAT;  // the host's row tile (128)
const uint SLOT_STEP = 64;              // the host's slot step
const uint DIM_BLOCKS = HEAD_DIM / MAT;
const uint MAX_DIM_BLOCKS = 8;  // register arrays are sized by fixed bounds (elements.glsl)
const uint ROW_OCTETS = HEAD_DIM / 8;  // a key or query row in uvec4 items of 8 halves

// Shared memory in uvec4 items (16 bytes: cooperative-matrix loads and stores want pointers and
// strides in multiples of 16 bytes). Rows ([slot][dim] or [row][dim] f16) are padded by one
// item so that consecutive rows start in different banks. First the workgroup's queries pass
// through it to A matrices; then it holds a step's key tile and, after it, each subgroup's
// scratch, which carries S out CHUNK_SLOTS slots at a time (16 rows of f32, padded by one
// item): 35 KiB at head_dim 128, 38 KiB with OUTPUT_SUMS' statistics and column sums (below),
// within the 48 KiB NVIDIA's Vulkan driver offers.
const uint ROW_STRIDE = ROW_OCTETS + 1;
const uint QUERY_ITEMS = ROW_TILE * ROW_STRIDE;
const uint KEY_ITEMS = SLOT_STEP * ROW_STRIDE;
const uint CHUNK_SLOTS = 2 * MAT;
const uint CHUNKS = SLOT_STEP / CHUNK_SLOTS;
const uint S_STRIDE = CHUNK_SLOTS / 4 + 1;
const uint SCRATCH_ITEMS = MAT * S_STRIDE;
const uint STEP_ITEMS = KEY_ITEMS + SUBGROUPS * SCRATCH_ITEMS;
// max(QUERY_ITEMS, STEP_ITEMS) in the operations a specialization constant allows.
const uint SHARED_ITEMS = uint(QUERY_ITEMS > STEP_ITEMS) * QUERY_ITEMS + uint(QUERY_ITEMS <= STEP_ITEMS) * STEP_ITEMS;
// Staging: each thread carries up to MAX_STAGED items of a step's keys from global memory
// (4 with the host's 256 threads at head_dim 128).
const uint STAGED_ITEMS = SLOT_STEP * ROW_OCTETS;
const uint STAGED_PER_THREAD = (STAGED_ITEMS + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;
const uint MAX_STAGED = 4;

shared uvec4 tile_items[SHARED_ITEMS];
// OUTPUT_SUMS: the rows' (max, 1 / sum), and each subgroup's column sums of a step's slots.
shared vec2 tile_row_stats[ROW_TILE];
shared float column_sums[SUBGROUPS * SLOT_STEP];

#define ACC coopmat<float, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseAccumulator>
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseB>

uvec4 pack_halves(vec4 low, vec4 high) {
  return uvec4(packHalf2x16(low.xy), packHalf2x16(low.zw), packHalf2x16(high.xy), packHalf2x16(high.zw));
}

// Item `item` ([slot][octet]) of the key step starting at `first_slot`; zero past the prefix, so
// that the tile holds no cache slack (NaN in the tests).
uvec4 key_item(uint kv_head, uint first_slot, uint item) {
  const uint slot = first_slot + item / ROW_OCTETS, octet = item % ROW_OCTETS;
  if (slot >= push.num_prefix) return uvec4(0u);
  return k_halves[(kv_head * push.slot_stride + slot) * ROW_OCTETS + octet];
}

uvec4 staged_keys[MAX_STAGED];
MAT_A q_frag[MAX_DIM_BLOCKS];  // the subgroup's 16 rows of queries, kept for the run

void stage_keys(uint kv_head, uint step) {
  [[unroll]] for (uint i = 0; i < STAGED_PER_THREAD; ++i) {
    const uint item = gl_LocalInvocationID.x + i * gl_WorkGroupSize.x;
    staged_keys[i] = item < STAGED_ITEMS ? key_item(kv_head, step * SLOT_STEP, item) : uvec4(0u);
  }
}

#include "quad_rows.glsl"

// One chunk's 16 x 16 block of S (slots from block_slot) in registers: this lane's share of its
// two rows' running (max, sum of exp) updated, or the block's column sums of probabilities
// into column_sums (at column_at).
void block_in_registers(ACC s_acc, uint block_slot, uint sub_first_row, uint rows_per_kv_head, uint column_at,
                        inout vec2 row_max, inout vec2 row_sum) {
  const uint lane = gl_SubgroupInvocationID;
  const float scale = inversesqrt(float(HEAD_DIM));
  if (OUTPUT == OUTPUT_SUMS) {
    const bvec2 real = lessThan(uvec2(sub_first_row + (lane >> 2)) + uvec2(0u, 8u), uvec2(rows_per_kv_head));
    // A column's elements: i and i + 4 in this lane (its two rows), then the 8 lanes of its
    // lane % 4 (lane / 4 = 0..7).
    const vec2 stats[2] = {tile_row_stats[gl_SubgroupID * MAT + (lane >> 2)], tile_row_stats[gl_SubgroupID * MAT + (lane >> 2) + 8u]};
    vec4 columns = vec4(0.0);
    [[unroll]] for (uint i = 0; i < FRAGMENT; ++i) {
      const uint half_index = fragment_half(i);
      if (real[half_index]) columns[i & 3u] += exp(scale * s_acc[i] - stats[half_index].x) * stats[half_index].y;
    }
    columns += subgroupShuffleXor(columns, 4u);
    columns += subgroupShuffleXor(columns, 8u);
    columns += subgroupShuffleXor(columns, 16u);
    if (lane < 4u)
      [[unroll]] for (uint j = 0; j < 4; ++j) column_sums[column_at + fragment_column(lane, j)] = columns[j];
    return;
  }
  vec2 block_max = vec2(KVC_NEG_INF);
  [[unroll]] for (uint i = 0; i < FRAGMENT; ++i) {
    if (block_slot + fragment_column(lane, i) < push.num_prefix)
      block_max[fragment_half(i)] = max(block_max[fragment_half(i)], scale * s_acc[i]);
  }
  const vec2 new_max = max(row_max, block_max);
  vec2 block_sum = vec2(0.0);
  [[unroll]] for (uint i = 0; i < FRAGMENT; ++i)
    if (block_slot + fragment_column(lane, i) < push.num_prefix) block_sum[fragment_half(i)] += exp(scale * s_acc[i] - new_max[fragment_half(i)]);
  row_sum = row_sum * exp(row_max - new_max) + block_sum;
  row_max = new_max;
}

// One step of a subgroup's rows: S = Q K^T for the step's keys (in shared memory); then the
// logits out and this lane's share of its rows' running (max, sum of exp) updated, or with
// OUTPUT_SUMS the subgroup's sums of the slots' probabilities into column_sums: in registers
// (block_in_registers) or through the subgroup's scratch, a lane pair per row.
void step_logits(uint step, uint sub_first_row, uint rows_per_kv_head, uint first_out_row, inout vec2 row_max, inout vec2 row_sum) {
  const uint lane = gl_SubgroupInvocationID, lane_row = lane >> 1, lane_half = lane & 1u;
  const uint scratch_base = KEY_ITEMS + gl_SubgroupID * SCRATCH_ITEMS;
  const float scale = inversesqrt(float(HEAD_DIM));
  // Per chunk of CHUNK_SLOTS slots (two accumulators live at a time, so that two workgroups fit
  // an SM's registers): S, then the logits out, lane = slot, a row per store; then this lane's
  // half of its row folded into the row's running (max, sum of exp).
  const uint first_slot = step * SLOT_STEP;
  const uint first_out = first_out_row * push.num_prefix + first_slot;
  [[unroll]] for (uint chunk = 0; chunk < CHUNKS; ++chunk) {
    const uint chunk_slot = first_slot + chunk * CHUNK_SLOTS;
    if (chunk_slot >= push.num_prefix) break;  // uniform: the prefix ends in an earlier chunk
    [[unroll]] for (uint half_block = 0; half_block < 2; ++half_block) {
      ACC s_acc = ACC(0.0);
      [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) {
        // K^T as B: element (dim, slot) sits at slot * ROW_STRIDE + dim, column-major.
        MAT_B k_frag;
        coopMatLoad(k_frag, tile_items, (chunk * CHUNK_SLOTS + half_block * MAT) * ROW_STRIDE + block * 2u, ROW_STRIDE,
                    gl_CooperativeMatrixLayoutColumnMajor);
        s_acc = coopMatMulAdd(q_frag[block], k_frag, s_acc);
      }
      if (ROWS_IN_REGISTERS)
        block_in_registers(s_acc, chunk_slot + half_block * MAT, sub_first_row, rows_per_kv_head,
                           gl_SubgroupID * SLOT_STEP + chunk * CHUNK_SLOTS + half_block * MAT, row_max, row_sum);
      else
        coopMatStore(s_acc, tile_items, scratch_base + half_block * (MAT / 4), S_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    }
    if (ROWS_IN_REGISTERS) continue;
    subgroupBarrier();

    if (OUTPUT == OUTPUT_SUMS) {
      float column = 0.0;
      [[unroll]] for (uint r = 0; r < MAT; ++r) {
        const vec2 stats = tile_row_stats[gl_SubgroupID * MAT + r];
        const float logit = scale * uintBitsToFloat(tile_items[scratch_base + r * S_STRIDE + lane / 4u][lane % 4u]);
        if (sub_first_row + r < rows_per_kv_head) column += exp(logit - stats.x) * stats.y;
      }
      column_sums[gl_SubgroupID * SLOT_STEP + chunk * CHUNK_SLOTS + lane] = column;
      subgroupBarrier();  // every lane has read the chunk before the next one overwrites it
      continue;
    }

    if (OUTPUT == OUTPUT_LOGITS && chunk_slot + lane < push.num_prefix) {
      const uint column_out = first_out + chunk * CHUNK_SLOTS + lane;
      [[unroll]] for (uint r = 0; r < MAT; ++r)
        if (sub_first_row + r < rows_per_kv_head)
          logits[column_out + r * push.num_prefix] = scale * uintBitsToFloat(tile_items[scratch_base + r * S_STRIDE + lane / 4u][lane % 4u]);
    }

    float s[MAT];
    [[unroll]] for (uint quad = 0; quad < MAT / 4; ++quad) {
      const vec4 four = uintBitsToFloat(tile_items[scratch_base + lane_row * S_STRIDE + lane_half * (MAT / 4) + quad]);
      [[unroll]] for (uint e = 0; e < 4; ++e) s[quad * 4 + e] = four[e] * scale;
    }
    const uint half_slot = chunk_slot + lane_half * MAT;
    float chunk_max = KVC_NEG_INF;
    [[unroll]] for (uint j = 0; j < MAT; ++j)
      if (half_slot + j < push.num_prefix) chunk_max = max(chunk_max, s[j]);
    const float new_max = max(row_max.x, chunk_max);
    float chunk_sum = 0.0;
    [[unroll]] for (uint j = 0; j < MAT; ++j)
      if (half_slot + j < push.num_prefix) chunk_sum += exp(s[j] - new_max);
    row_sum.x = row_sum.x * exp(row_max.x - new_max) + chunk_sum;
    row_max.x = new_max;
    subgroupBarrier();  // every lane has read the chunk before the next one overwrites it
  }
}

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint subgroup = gl_SubgroupID;
  // Through the scratch, lane pair (2r, 2r + 1) holds row r of the subgroup's 16 (row
  // statistics), each half of a chunk's slots.
  const uint lane_row = gl_SubgroupInvocationID >> 1, lane_half = gl_SubgroupInvocationID & 1u;
  const uint kv_head = gl_WorkGroupID.y;
  const uint rows_per_kv_head = push.group_size * push.window;
  const uint first_row = gl_WorkGroupID.z * ROW_TILE;  // the workgroup's, within the kv head
  const uint sub_first_row = first_row + subgroup * MAT;
  const bool sub_real = sub_first_row < rows_per_kv_head;  // a subgroup of padding rows computes nothing
  const uint row = sub_first_row + lane_row;
  const uint num_steps = (push.num_prefix + SLOT_STEP - 1) / SLOT_STEP;
  const uint first_step = gl_WorkGroupID.x * push.steps_per_group;
  const uint end_step = min(first_step + push.steps_per_group, num_steps);
  const float scale = inversesqrt(float(HEAD_DIM));

  // The first step's keys are in flight while the queries become A matrices: the workgroup's
  // rows as f16 [row][dim] in shared memory (zero past the kv head's rows), then a load each.
  stage_keys(kv_head, first_step);
  if (OUTPUT == OUTPUT_SUMS)
    for (uint tile_row = thread; tile_row < ROW_TILE; tile_row += gl_WorkGroupSize.x)
      if (first_row + tile_row < rows_per_kv_head) tile_row_stats[tile_row] = row_stats[kv_head * rows_per_kv_head + first_row + tile_row];
  for (uint item = thread; item < ROW_TILE * ROW_OCTETS; item += gl_WorkGroupSize.x) {
    const uint tile_row = item / ROW_OCTETS, octet = item % ROW_OCTETS;
    const uint kv_row = first_row + tile_row;
    uvec4 halves = uvec4(0u);
    if (kv_row < rows_per_kv_head) {
      const uint head = kv_head * push.group_size + kv_row / push.window, query = kv_row % push.window;
      const uint quad = (query * push.num_q_heads + head) * (HEAD_DIM / 4) + octet * 2u;
      halves = pack_halves(q_rot[quad] / scale, q_rot[quad + 1u] / scale);
    }
    tile_items[tile_row * ROW_STRIDE + octet] = halves;
  }
  barrier();
  if (sub_real)
    [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block)
      coopMatLoad(q_frag[block], tile_items, subgroup * MAT * ROW_STRIDE + block * 2u, ROW_STRIDE, gl_CooperativeMatrixLayoutRowMajor);

  // This lane's share of its rows' running (max, sum of exp) over the workgroup's steps: through
  // shared memory half of its lane pair's row (in .x), in registers its two QuadRows rows.
  vec2 row_max = vec2(KVC_NEG_INF), row_sum = vec2(0.0);
  for (uint step = first_step; step < end_step; ++step) {
    barrier();  // the queries, or the last step's keys, are read before this step's overwrite them
    [[unroll]] for (uint i = 0; i < STAGED_PER_THREAD; ++i) {
      const uint item = thread + i * gl_WorkGroupSize.x;
      if (item < STAGED_ITEMS) tile_items[(item / ROW_OCTETS) * ROW_STRIDE + item % ROW_OCTETS] = staged_keys[i];
    }
    barrier();
    if (step + 1u < end_step) stage_keys(kv_head, step + 1u);  // in flight during the product
    if (sub_real) step_logits(step, sub_first_row, rows_per_kv_head, kv_head * rows_per_kv_head + sub_first_row, row_max, row_sum);
    if (OUTPUT == OUTPUT_SUMS) {
      // The subgroups' column sums added in a fixed order: a slot's sum is the same every run.
      barrier();
      const uint slot = step * SLOT_STEP + thread;
      if (thread < SLOT_STEP && slot < push.num_prefix) {
        float total = 0.0;
        for (uint sub = 0; sub < SUBGROUPS && first_row + sub * MAT < rows_per_kv_head; ++sub) total += column_sums[sub * SLOT_STEP + thread];
        sums[kv_head * push.num_prefix + slot] = total;
      }
    }
  }
  if (!sub_real || OUTPUT == OUTPUT_SUMS) return;

  // The shares of a row merged, over the lane pair or the quad: a share with no slot in the
  // prefix has max -FLT_MAX and sum 0.
  [[unroll]] for (uint mask = 1u; mask <= (ROWS_IN_REGISTERS ? 2u : 1u); mask <<= 1) {
    const vec2 other_max = subgroupShuffleXor(row_max, mask), other_sum = subgroupShuffleXor(row_sum, mask);
    const vec2 merged_max = max(row_max, other_max);
    row_sum = row_sum * exp(row_max - merged_max) + other_sum * exp(other_max - merged_max);
    row_max = merged_max;
  }
  if (ROWS_IN_REGISTERS) {
    const uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint half_index = 0; half_index < 2; ++half_index) {
      const uint quad_row = sub_first_row + (lane >> 2) + 8u * half_index;
      if (quad_row < rows_per_kv_head && (lane & 3u) == 0u)
        partials[(kv_head * rows_per_kv_head + quad_row) * push.num_tiles + gl_WorkGroupID.x] = vec2(row_max[half_index], row_sum[half_index]);
    }
  } else if (row < rows_per_kv_head && lane_half == 0u) {
    partials[(kv_head * rows_per_kv_head + row) * push.num_tiles + gl_WorkGroupID.x] = vec2(row_max.x, row_sum.x);
  }
}
