#version 450
// Flash-decoding, pass 2, for the split-K kernels that leave their merge to a dispatch of its
// own (fourier_attention's partials; attention_decode merges its own): one workgroup per query
// head, which writes the output and its log-sum-exp.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Partials { float partials[]; };  // [head][split][m, l, acc...]
layout(binding = 1) writeonly buffer Out { uint out_words[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };

layout(push_constant) uniform Push { uint num_splits; } push;

#define KVC_MERGE_OUT_WORDS out_words
#include "merge_splits.glsl"

void main() {
  const uint head = gl_WorkGroupID.x;
  merge_splits(head * push.num_splits, push.num_splits, head, head);
}
