#version 450
// out[h][r][d] = sum_n matrix[r][n] * in[h][n][d] (ops/sequence_transform.h): a tiled matrix
// product per head. A workgroup owns ROW_TILE output rows x DIM_TILE dims of one head; each
// thread ROWS_PER_THREAD rows x 4 consecutive dims (so an f16 thread writes whole words).
// The sequence is walked in STEP_TILE rows, staged in shared memory with the matching
// matrix columns. Spec constants: see layout(constant_id) below.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // (ROW_TILE / ROWS_PER_THREAD) * (DIM_TILE / 4)
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint DIM_TILE = 64;  // min(64, HEAD_DIM)
layout(constant_id = 3) const bool IS_F16 = false;

#include "elements.glsl"

const uint ROW_TILE = 64;
const uint ROWS_PER_THREAD = 4;
const uint ROW_GROUPS = ROW_TILE / ROWS_PER_THREAD;
const uint STEP_TILE = 16;

layout(binding = 0) readonly buffer In { uint in_words[]; };
layout(binding = 1) readonly buffer Matrix { float matrix[]; };
layout(binding = 2) writeonly buffer Out { uint out_words[]; };

layout(push_constant) uniform Push {
  uint in_length;
  uint out_length;
  uint in_head_elements;   // in_head_stride * HEAD_DIM
  uint out_head_elements;
  uint in_first;           // element of in_words where head 0's first row starts
  uint out_first;          // the same for out_words; even for f16
} push;

shared vec4 rows_tile[STEP_TILE][DIM_TILE / 4];
shared float matrix_tile[ROW_TILE][STEP_TILE + 1];  // +1: threads of one row group hit distinct banks

void main() {
  const uint threads = ROW_GROUPS * (DIM_TILE / 4);
  const uint thread = gl_LocalInvocationID.x;
  const uint dim_group = thread % (DIM_TILE / 4);
  const uint row_group = thread / (DIM_TILE / 4);
  const uint first_row = gl_WorkGroupID.x * ROW_TILE;
  const uint first_dim = gl_WorkGroupID.y * DIM_TILE;
  const uint in_head = push.in_first + gl_WorkGroupID.z * push.in_head_elements;

  vec4 sums[ROWS_PER_THREAD];
  for (uint i = 0; i < ROWS_PER_THREAD; ++i) sums[i] = vec4(0.0);

  for (uint step = 0; step < push.in_length; step += STEP_TILE) {
    for (uint item = thread; item < STEP_TILE * (DIM_TILE / 4); item += threads) {
      const uint n = step + item / (DIM_TILE / 4);
      const uint d = first_dim + 4 * (item % (DIM_TILE / 4));
      vec4 value = vec4(0.0);
      if (n < push.in_length && d < HEAD_DIM) {
        const uint at = in_head + n * HEAD_DIM + d;
        value = vec4(KVC_LOAD_ELEMENT(in_words, IS_F16, at), KVC_LOAD_ELEMENT(in_words, IS_F16, at + 1u),
                     KVC_LOAD_ELEMENT(in_words, IS_F16, at + 2u), KVC_LOAD_ELEMENT(in_words, IS_F16, at + 3u));
      }
      rows_tile[item / (DIM_TILE / 4)][item % (DIM_TILE / 4)] = value;
    }
    for (uint item = thread; item < ROW_TILE * STEP_TILE; item += threads) {
      const uint r = first_row + item / STEP_TILE, n = step + item % STEP_TILE;
      matrix_tile[item / STEP_TILE][item % STEP_TILE] =
          (r < push.out_length && n < push.in_length) ? matrix[r * push.in_length + n] : 0.0;
    }
    barrier();
    for (uint s = 0; s < STEP_TILE; ++s) {
      const vec4 value = rows_tile[s][dim_group];
      for (uint i = 0; i < ROWS_PER_THREAD; ++i) sums[i] += matrix_tile[row_group + i * ROW_GROUPS][s] * value;
    }
    barrier();
  }

  const uint d = first_dim + 4 * dim_group;
  if (d >= HEAD_DIM) return;
  for (uint i = 0; i < ROWS_PER_THREAD; ++i) {
    const uint r = first_row + row_group + i * ROW_GROUPS;
    if (r >= push.out_length) continue;
    const uint at = push.out_first + gl_WorkGroupID.z * push.out_head_elements + r * HEAD_DIM + d;
    if (IS_F16) {
      out_words[at >> 1] = packHalf2x16(sums[i].xy);
      out_words[(at >> 1) + 1u] = packHalf2x16(sums[i].zw);
    } else {
      out_words[at] = floatBitsToUint(sums[i].x);
      out_words[at + 1u] = floatBitsToUint(sums[i].y);
      out_words[at + 2u] = floatBitsToUint(sums[i].z);
      out_words[at + 3u] = floatBitsToUint(sums[i].w);
    }
  }
}
