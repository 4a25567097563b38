#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Per-row top-k, one workgroup per row. Key of a position: (priority flag << 31) | the
// score's bits (scores are >= 0, so their bits order as integers). Order: higher key first,
// then the earlier position.
// 1. Radix select (radix_select.glsl): the k-th key T and `needed_equal`, how many keys
//    equal to T are taken.
// 2. Ordered write: tiles of WORKGROUP * RUN_LENGTH positions; each thread counts its run's
//    keys > T and == T, one prefix scan (both counts packed in one word) gives each thread
//    where its selected positions go, so the output is ascending.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint RUN_LENGTH = 8;
layout(constant_id = 2) const bool HAS_PRIORITY = false;

layout(binding = 0) readonly buffer Scores { uint score_bits[]; };
layout(binding = 1) readonly buffer Priority { uint priority[]; };
layout(binding = 2) writeonly buffer Indices { uint indices[]; };

layout(push_constant) uniform Push {
  uint row_length;
  uint row_stride;
  uint k;
  uint index_stride;
  uint priority_min;
  uint rows_per_block;  // rows come in blocks (TopKShape), block b's rows from b * block_stride
  uint block_stride;
  uint index_block_stride;
  uint block_ks;  // entries of block_k: block b's rows keep block_k[b] (0: every row keeps k)
  uint block_k[23];  // kTopKMaxBlockKs (ops/top_k.h)
} push;

const uint WORKGROUP = gl_WorkGroupSize.x;
uint base;  // the row's first element

uint select_key(uint i) {
  const uint flag = HAS_PRIORITY && priority[base + i] >= push.priority_min ? 0x80000000u : 0u;
  return flag | (score_bits[base + i] & 0x7fffffffu);
}

#include "workgroup_scan.glsl"
#include "radix_select.glsl"

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint block = gl_WorkGroupID.x / push.rows_per_block, row_in_block = gl_WorkGroupID.x % push.rows_per_block;
  base = block * push.block_stride + row_in_block * push.row_stride;
  const uint index_base = block * push.index_block_stride + row_in_block * push.index_stride;
  const uint k = push.block_ks == 0u ? push.k : push.block_k[block];
  if (k == 0u) return;  // uniform in the workgroup

  const RadixSelection selection = radix_select(push.row_length, k);
  const uint threshold = selection.threshold;
  const uint needed_equal = selection.needed_equal;

  uint written = 0u, taken_equal = 0u;
  for (uint tile = 0u; tile < push.row_length; tile += WORKGROUP * RUN_LENGTH) {
    const uint first = tile + thread * RUN_LENGTH;
    const uint last = min(first + RUN_LENGTH, push.row_length);
    uint above = 0u, equal = 0u;
    for (uint i = first; i < last; ++i) {
      const uint key = select_key(i);
      above += key > threshold ? 1u : 0u;
      equal += key == threshold ? 1u : 0u;
    }
    const uint packed = (above << 16) | equal;  // each count <= WORKGROUP * RUN_LENGTH < 2^16
    const uint before = workgroup_inclusive_sum(packed) - packed;
    const uint total = workgroup_scan_total();
    barrier();  // the scan is rewritten by the next tile
    uint equal_rank = taken_equal + (before & 0xffffu);
    uint destination = written + (before >> 16) + min(before & 0xffffu, needed_equal - taken_equal);
    for (uint i = first; i < last; ++i) {
      const uint key = select_key(i);
      bool take = key > threshold;
      if (key == threshold) take = equal_rank++ < needed_equal;
      if (take) indices[index_base + destination++] = i;
    }
    const uint equal_taken_now = min(total & 0xffffu, needed_equal - taken_equal);
    written += (total >> 16) + equal_taken_now;
    taken_equal += equal_taken_now;
  }
}
