#version 450
// Window scores, step 1 on cooperative matrices (VK_KHR_cooperative_matrix: tensor cores): the
// twin of window_logits.comp (f32 SIMT, every device) with the same grid, tiles and outputs,
// the logits of a kv head's observation rows (group heads x window queries) against a tile of
// SLOT_TILE prefix slots and each row's (max, sum of exp) over the tile for window_softmax.
// The host takes it for f16 caches on devices that list a 16x16x16 f16 x f16 -> f32 subgroup
// shape, with 32-lane subgroups.
//
// A workgroup owns ROW_TILE rows of one kv head (all of them at the kvc-bench shape, 4 heads x
// 32 queries, so each key is read and rotated once) and one slot tile; each subgroup owns 16
// rows, keeps their queries as A matrices and S = Q K^T for the whole tile (16 x SLOT_TILE) as
// SLOT_BLOCKS accumulators. The tile's keys are staged (rotated, f16) in shared memory once.
// Queries arrive rotated and scaled by 1/sqrt(head_dim) (q_rot, from the rope op); the scale is
// taken out before rounding to f16, so an unrotated f16 query stays exact, and applied to S in
// f32, as attention_prefill_coopmat.comp does.
// Writing the logits is the kernel's biggest traffic (128 MiB a layer at the kvc-bench shape),
// so they leave coalesced: the accumulators go through the subgroup's scratch 32 slots at a
// time and each store instruction writes 32 consecutive floats of one row (a 128-byte line).
// coopMatStore straight to the buffer would need num_prefix a multiple of 4 (the 16-byte
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
layout(constant_id = 2) const uint ROPE_STYLE = 0;
layout(constant_id = 3) const uint ROTARY_DIMS = 0;

#include "elements.glsl"
#include "rope.glsl"

layout(binding = 0) readonly buffer Query { vec4 q_rot[]; };  // [window][num_q_heads][HEAD_DIM / 4], scaled
layout(binding = 1) readonly buffer Keys { uvec4 k_halves[]; };  // f16: [kv][slot_stride][HEAD_DIM / 8]
layout(binding = 1) readonly buffer KeyWords { uint k_words[]; };  // the same keys as key_chunk reads them
layout(binding = 2) readonly buffer Positions { int positions[]; };  // [kv][slot_stride]; ROPE_STYLE only
layout(binding = 3) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 4) writeonly buffer Logits { float logits[]; };    // [num_q_heads][window][num_prefix]
layout(binding = 5) writeonly buffer Partials { vec2 partials[]; };  // [num_q_heads * window][num_tiles]

layout(push_constant) uniform Push {
  uint num_prefix;
  uint slot_stride;
  uint window;
  uint group_size;
  uint num_q_heads;
  uint num_tiles;
} push;

const bool KV_F16 = true;  // key_chunk's stored dtype: this kernel takes f16 caches only
#include "key_chunk.glsl"

// The host takes this kernel only where subgroups are 32 wide: a lane pair per row of 16.
const uint SUBGROUP_SIZE = 32;
const uint SUBGROUPS = gl_WorkGroupSize.x / SUBGROUP_SIZE;
const uint MAT = 16;  // M = N = K of every matrix product
const uint ROW_TILE = SUBGROUPS * MAT;  // the host's row tile (128)
const uint SLOT_TILE = 128;             // the host's slot tile: one (max, sum) partial per row
const uint SLOT_BLOCKS = SLOT_TILE / MAT;
const uint DIM_BLOCKS = HEAD_DIM / MAT;
const uint MAX_DIM_BLOCKS = 8;  // register arrays are sized by fixed bounds (elements.glsl)
const uint ROW_OCTETS = HEAD_DIM / 8;  // a key row in uvec4 items of 8 halves

// Shared memory in uvec4 items (16 bytes: cooperative-matrix loads and stores want pointers and
// strides in multiples of 16 bytes). The key tile is [slot][dim] f16 rows padded by one item so
// that consecutive rows start in different banks. Each subgroup's scratch first carries its
// queries to A matrices (16 x 16 f16 at a time), and after the product its S out, CHUNK_SLOTS
// slots at a time (16 rows of f32, padded by one item); the scratches overlay the key tile,
// whose reads are over by then, so that the whole fits 48 KiB (NVIDIA's limit) at head_dim 128.
const uint TILE_STRIDE = ROW_OCTETS + 1;
const uint TILE_ITEMS = SLOT_TILE * TILE_STRIDE;
const uint Q_STRIDE = MAT / 8;
const uint CHUNK_SLOTS = 2 * MAT;
const uint CHUNKS = SLOT_TILE / CHUNK_SLOTS;
const uint S_STRIDE = CHUNK_SLOTS / 4 + 1;
const uint SCRATCH_ITEMS = MAT * S_STRIDE;
const uint SCRATCHES_ITEMS = SUBGROUPS * SCRATCH_ITEMS;
// max(TILE_ITEMS, SCRATCHES_ITEMS) in the operations a specialization constant allows.
const uint SHARED_ITEMS = uint(TILE_ITEMS > SCRATCHES_ITEMS) * TILE_ITEMS + uint(TILE_ITEMS <= SCRATCHES_ITEMS) * SCRATCHES_ITEMS;
// Staging: each thread carries up to MAX_ITEMS items of the key tile from global memory
// (DIM_BLOCKS of them with the host's 256 threads).
const uint ITEMS = SLOT_TILE * ROW_OCTETS;
const uint ITEMS_PER_THREAD = (ITEMS + gl_WorkGroupSize.x - 1) / gl_WorkGroupSize.x;
const uint MAX_ITEMS = 8;

shared uvec4 tile_items[SHARED_ITEMS];

#define ACC coopmat<float, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseAccumulator>
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseB>

uvec4 pack_halves(vec4 low, vec4 high) {
  return uvec4(packHalf2x16(low.xy), packHalf2x16(low.zw), packHalf2x16(high.xy), packHalf2x16(high.zw));
}

// Item `item` ([slot][octet]) of the key tile starting at `first_slot`, rotated to its slot's
// position; zero past the prefix, so that the tile holds no cache slack (NaN in the tests).
uvec4 key_item(uint kv_head, uint first_slot, uint item) {
  const uint slot = first_slot + item / ROW_OCTETS, octet = item % ROW_OCTETS;
  if (slot >= push.num_prefix) return uvec4(0u);
  const uint row = kv_head * push.slot_stride + slot;
  if (ROPE_STYLE == 0) return k_halves[row * ROW_OCTETS + octet];
  const uint position = uint(positions[row]);
  return pack_halves(key_chunk(row * HEAD_DIM, 8u * octet, position), key_chunk(row * HEAD_DIM, 8u * octet + 4u, position));
}

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint subgroup = gl_SubgroupID;
  const uint lane = gl_SubgroupInvocationID;
  // Lane pair (2r, 2r + 1) holds row r of the subgroup's 16 (queries in, row statistics out),
  // each half of a 16-dim block or of a chunk's slots.
  const uint lane_row = lane >> 1, lane_half = lane & 1u;
  const uint tile = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y;
  const uint rows_per_kv_head = push.group_size * push.window;
  const uint sub_first_row = gl_WorkGroupID.z * ROW_TILE + subgroup * MAT;  // within the kv head
  const bool sub_real = sub_first_row < rows_per_kv_head;  // a subgroup of padding rows computes nothing
  const uint row = sub_first_row + lane_row;
  const bool row_real = row < rows_per_kv_head;
  const uint first_slot = tile * SLOT_TILE;
  const uint scratch_base = subgroup * SCRATCH_ITEMS;
  const float scale = inversesqrt(float(HEAD_DIM));

  // The tile's keys are in flight while the queries are made A matrices.
  uvec4 staged_keys[MAX_ITEMS];
  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * gl_WorkGroupSize.x;
    staged_keys[i] = item < ITEMS ? key_item(kv_head, first_slot, item) : uvec4(0u);
  }

  MAT_A q_frag[MAX_DIM_BLOCKS];
  if (sub_real) {
    const uint head = kv_head * push.group_size + row / push.window, query = row % push.window;
    [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) {
      uvec4 halves = uvec4(0u);
      if (row_real) {
        const uint quad = (query * push.num_q_heads + head) * (HEAD_DIM / 4) + block * 4u + lane_half * 2u;
        halves = pack_halves(q_rot[quad] / scale, q_rot[quad + 1u] / scale);
      }
      tile_items[scratch_base + lane_row * Q_STRIDE + lane_half] = halves;
      subgroupBarrier();
      coopMatLoad(q_frag[block], tile_items, scratch_base, Q_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
      subgroupBarrier();
    }
  }
  barrier();  // every scratch is read before the key tile overwrites it

  [[unroll]] for (uint i = 0; i < ITEMS_PER_THREAD; ++i) {
    const uint item = thread + i * gl_WorkGroupSize.x;
    if (item < ITEMS) tile_items[(item / ROW_OCTETS) * TILE_STRIDE + item % ROW_OCTETS] = staged_keys[i];
  }
  barrier();

  ACC s_acc[SLOT_BLOCKS];
  if (sub_real) {
    [[unroll]] for (uint sb = 0; sb < SLOT_BLOCKS; ++sb) {
      s_acc[sb] = ACC(0.0);
      [[unroll]] for (uint block = 0; block < DIM_BLOCKS; ++block) {
        // K^T as B: element (dim, slot) sits at slot * TILE_STRIDE + dim, column-major.
        MAT_B k_frag;
        coopMatLoad(k_frag, tile_items, sb * MAT * TILE_STRIDE + block * 2u, TILE_STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
        s_acc[sb] = coopMatMulAdd(q_frag[block], k_frag, s_acc[sb]);
      }
    }
  }
  barrier();  // the key tile is read before the scratches overwrite it

  if (!sub_real) return;
  // Per chunk of CHUNK_SLOTS slots: the logits out, lane = slot, a row per store; then this
  // lane's half of its row folded into the row's running (max, sum of exp).
  float row_max = KVC_NEG_INF, row_sum = 0.0;
  const uint first_out = (kv_head * rows_per_kv_head + sub_first_row) * push.num_prefix + first_slot;
  [[unroll]] for (uint chunk = 0; chunk < CHUNKS; ++chunk) {
    const uint chunk_slot = first_slot + chunk * CHUNK_SLOTS;
    if (chunk_slot >= push.num_prefix) break;  // uniform: the prefix ends in an earlier chunk
    coopMatStore(s_acc[2 * chunk], tile_items, scratch_base, S_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(s_acc[2 * chunk + 1], tile_items, scratch_base + MAT / 4, S_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    subgroupBarrier();

    if (chunk_slot + lane < push.num_prefix) {
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
    const float new_max = max(row_max, chunk_max);
    float chunk_sum = 0.0;
    [[unroll]] for (uint j = 0; j < MAT; ++j)
      if (half_slot + j < push.num_prefix) chunk_sum += exp(s[j] - new_max);
    row_sum = row_sum * exp(row_max - new_max) + chunk_sum;
    row_max = new_max;
    subgroupBarrier();  // every lane has read the chunk before the next one overwrites it
  }

  // The lane pair's halves merged: a half with no slot in the prefix has max -FLT_MAX and sum 0.
  const float other_max = subgroupShuffleXor(row_max, 1u), other_sum = subgroupShuffleXor(row_sum, 1u);
  const float tile_max = max(row_max, other_max);
  const float tile_sum = row_sum * exp(row_max - tile_max) + other_sum * exp(other_max - tile_max);
  if (row_real && lane_half == 0u) partials[(kv_head * rows_per_kv_head + row) * push.num_tiles + tile] = vec2(tile_max, tile_sum);
}
