#version 450
// Flash-decoding, pass 2, for attention_decode's partials ([head][split][m, l, acc...]) and by
// the split-K kernels that write the same (fourier_attention): workgroup (query head, 1, dim
// block) writes its share of the head's output, block 0 the log-sum-exp (read by
// attention_scores).
#extension GL_GOOGLE_include_directive : require

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
