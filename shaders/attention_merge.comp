#version 450
// Flash-decoding, pass 2, for attention_decode's partials ([head][split][m, l, acc...]) and by
// the split-K kernels that write the same (fourier_attention): workgroup (query head, 1, dim
// block) writes its share of the head's output, block 0 the log-sum-exp (read by
// attention_scores).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;
const uint WG = gl_WorkGroupSize.x;

layout(binding = 0) readonly buffer Partials { float partials[]; };  // [head][split][m, l, acc...]
layout(binding = 1) writeonly buffer Out { uint out_words[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };

layout(push_constant) uniform Push { uint num_splits; } push;

#define KVC_MERGE_OUT_WORDS out_words
#include "merge_splits.glsl"

void main() {
  const uint head = gl_WorkGroupID.x;
  merge_splits(head * push.num_splits, push.num_splits, head, head, gl_WorkGroupID.z, gl_NumWorkGroups.z);
}
