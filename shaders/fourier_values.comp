#version 450
// FourierAttention decode, factorized route, step 4 (ops/fourier_attention.h): workgroup
// (chunk of tokens, kv head) sums p v over its tokens for every query head of the kv head,
// thread i over dim i of the full rows and over packed dim i of the middle (output dim
// v_dims[compressed + i]); the partial per (query head, chunk) goes to fourier_values_final.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;  // >= HEAD_DIM
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GROUP = 4;
layout(constant_id = 3) const bool KV_F16 = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer Values { uint v_words[]; };
layout(binding = 1) readonly buffer ValueMiddle { uint v_middle[]; };
layout(binding = 2) readonly buffer ValueDims { uint v_dims[]; };
layout(binding = 3) readonly buffer Probabilities { float p[]; };  // [num_q_heads][total]
layout(binding = 4) writeonly buffer Partials { float partials[]; };  // [num_q_heads][num_chunks][HEAD_DIM]

layout(push_constant) uniform Push {
  uint num_full_slots;
  uint slot_stride;
  uint num_middle;
  uint middle_stride;
  uint compressed;
  uint num_chunks;
  uint chunk_tokens;  // tokens per chunk, the last one's fewer
} push;

shared float out_s[GROUP * HEAD_DIM];

void main() {
  const uint chunk = gl_WorkGroupID.x, kv_head = gl_WorkGroupID.y, i = gl_LocalInvocationID.x;
  const uint total = push.num_full_slots + push.num_middle, head0 = kv_head * GROUP;
  const uint first = min(chunk * push.chunk_tokens, total), end = min(first + push.chunk_tokens, total);
  const uint kept = HEAD_DIM - push.compressed;
  float full[GROUP], middle[GROUP];
  for (uint g = 0; g < GROUP; ++g) full[g] = middle[g] = 0.0;
  if (i < HEAD_DIM) {
    for (uint j = first; j < min(end, push.num_full_slots); ++j) {
      const float v = KVC_LOAD_ELEMENT(v_words, KV_F16, (kv_head * push.slot_stride + j) * HEAD_DIM + i);
      for (uint g = 0; g < GROUP; ++g) full[g] += p[(head0 + g) * total + j] * v;
    }
    if (i < kept)
      for (uint j = max(first, push.num_full_slots); j < end; ++j) {
        const uint m = j - push.num_full_slots;
        const float v = KVC_LOAD_ELEMENT(v_middle, KV_F16, (kv_head * push.middle_stride + m) * kept + i);
        for (uint g = 0; g < GROUP; ++g) middle[g] += p[(head0 + g) * total + j] * v;
      }
    for (uint g = 0; g < GROUP; ++g) out_s[g * HEAD_DIM + i] = full[g];
  }
  barrier();
  if (push.num_middle > 0 && i < kept)  // without a middle, v_dims is a stand-in
    for (uint g = 0; g < GROUP; ++g) out_s[g * HEAD_DIM + v_dims[kv_head * HEAD_DIM + push.compressed + i]] += middle[g];
  barrier();
  if (i < HEAD_DIM)
    for (uint g = 0; g < GROUP; ++g) partials[((head0 + g) * push.num_chunks + chunk) * HEAD_DIM + i] = out_s[g * HEAD_DIM + i];
}
