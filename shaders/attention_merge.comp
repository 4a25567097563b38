#version 450
// Flash-decoding, pass 2, for the kernels that leave it to a dispatch of its own (FourierAttention's
// partials; attention_decode merges its own): combines the splits' partials of one query head
// into the output and its log-sum-exp. One workgroup per query head.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // a power of two
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Partials { float partials[]; };  // [head][split][m, l, acc...]
layout(binding = 1) writeonly buffer Out { uint out_words[]; };
layout(binding = 2) writeonly buffer Lse { float lse[]; };

layout(push_constant) uniform Push { uint num_splits; } push;

#include "merge_partials.glsl"

void main() { merge_head(gl_WorkGroupID.x, push.num_splits); }
