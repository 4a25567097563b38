#version 450
// Packs chosen dims of rows (ops/gather_dims.h). A thread owns one 32-bit word of the output
// (two elements in f16), so packed f16 rows of odd length never have two threads writing one
// word; a word's element outside the rows written keeps its value. A word whose halves belong
// to two heads' rows (one head's region ends where the next begins, mid-word) is written once,
// by the first of those heads' workgroups, with both halves. DIM_MAJOR: each dim's run of
// tokens is contiguous and starts on a word (the host keeps f16 slot strides even), so a word
// holds one run's elements alone and its thread keeps the half outside the rows written.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool IN_F16 = false;
layout(constant_id = 2) const bool OUT_F16 = false;
layout(constant_id = 3) const bool DIM_MAJOR = false;

#include "elements.glsl"

layout(binding = 0) readonly buffer In { uint in_words[]; };
layout(binding = 1) readonly buffer Dims { uint dims[]; };
layout(binding = 2) buffer Out { uint out_words[]; };

layout(push_constant) uniform Push {
  uint in_row_elements;
  uint in_slot_stride;
  uint in_first_slot;
  uint num_rows;
  uint dims_row;
  uint first_dim;
  uint num_dims;
  uint out_slot_stride;
  uint out_first_slot;
} push;

// The value of output element e of `head`'s rows (e counted from the head's first output row).
float gathered(uint head, uint e) {
  const uint i = e / push.num_dims, u = e % push.num_dims;
  const uint dim = dims[head * push.dims_row + push.first_dim + u];
  return KVC_LOAD_ELEMENT(in_words, IN_F16, (head * push.in_slot_stride + push.in_first_slot + i) * push.in_row_elements + dim);
}

// Element index in out of `head`'s first gathered element.
uint first_element(uint head) { return (head * push.out_slot_stride + push.out_first_slot) * push.num_dims; }

// The head whose gathered elements include e, among head - 1 .. head + 1, or 0xffffffff.
uint owner(uint head, uint e) {
  for (uint h = head == 0u ? 0u : head - 1u; h <= head + 1u && h < gl_NumWorkGroups.y; ++h)
    if (e >= first_element(h) && e < first_element(h) + push.num_rows * push.num_dims) return h;
  return 0xffffffffu;
}

// DIM_MAJOR: out[head][u][out_first_slot + i] for every dim u of the head.
void gather_dim_major(uint head) {
  const uint per_word = OUT_F16 ? 2u : 1u;
  const uint first_word = push.out_first_slot / per_word;  // of a run
  const uint run_words = (push.out_first_slot + push.num_rows + per_word - 1u) / per_word - first_word;
  const uint in_row = head * push.in_slot_stride + push.in_first_slot - push.out_first_slot;  // in's row of slot 0
  for (uint k = gl_GlobalInvocationID.x; k < run_words * push.num_dims; k += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint u = k / run_words, run_word = first_word + k % run_words;
    const uint word = ((head * push.num_dims + u) * push.out_slot_stride) / per_word + run_word;
    const uint dim = dims[head * push.dims_row + push.first_dim + u];
    if (!OUT_F16) {
      out_words[word] = floatBitsToUint(KVC_LOAD_ELEMENT(in_words, IN_F16, (in_row + run_word) * push.in_row_elements + dim));
      continue;
    }
    uint bits = out_words[word];  // a half outside the rows keeps its bits exactly
    for (uint half_index = 0u; half_index < 2u; ++half_index) {
      const uint slot = 2u * run_word + half_index, shift = 16u * half_index;
      if (slot < push.out_first_slot || slot >= push.out_first_slot + push.num_rows) continue;
      const float value = KVC_LOAD_ELEMENT(in_words, IN_F16, (in_row + slot) * push.in_row_elements + dim);
      bits = (bits & ~(0xffffu << shift)) | ((packHalf2x16(vec2(value, 0.0)) & 0xffffu) << shift);
    }
    out_words[word] = bits;
  }
}

void main() {
  const uint head = gl_WorkGroupID.y;
  if (DIM_MAJOR) {
    gather_dim_major(head);
    return;
  }
  const uint count = push.num_rows * push.num_dims;
  const uint first = first_element(head);
  const uint per_word = OUT_F16 ? 2u : 1u;
  const uint first_word = first / per_word, end_word = (first + count + per_word - 1u) / per_word;
  for (uint word = first_word + gl_GlobalInvocationID.x; word < end_word; word += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    if (OUT_F16) {
      const uint owners[2] = uint[2](owner(head, 2u * word), owner(head, 2u * word + 1u));
      if (min(owners[0], owners[1]) != head) continue;  // the previous head's workgroup writes this word
      uint bits = out_words[word];  // a half outside every head's rows keeps its bits exactly
      for (uint half_index = 0u; half_index < 2u; ++half_index) {
        const uint e = 2u * word + half_index, h = owners[half_index];
        if (h == 0xffffffffu) continue;
        const uint shift = 16u * half_index;
        bits = (bits & ~(0xffffu << shift)) | ((packHalf2x16(vec2(gathered(h, e - first_element(h)), 0.0)) & 0xffffu) << shift);
      }
      out_words[word] = bits;
    } else {
      out_words[word] = floatBitsToUint(gathered(head, word - first));
    }
  }
}
