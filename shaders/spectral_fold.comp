#version 450
// FAEDKV's Infinite-Window DFT in a frame that does not turn (ops/spectral_fold.h): item
// (head, bin, dim) folds the ring's tokens into its K and V states, oldest first.
#extension GL_GOOGLE_include_directive : require
#include "elements.glsl"
#include "modular.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool KV_F16 = false;

layout(binding = 0) readonly buffer Keys { uint k_words[]; };
layout(binding = 1) readonly buffer Values { uint v_words[]; };
layout(binding = 2) readonly buffer Bins { uint bins[]; };
layout(binding = 3) buffer KeyStates { vec2 key_states[]; };    // [num_heads][num_bins][HEAD_DIM]
layout(binding = 4) buffer ValueStates { vec2 value_states[]; };

layout(push_constant) uniform Push {
  uint slot_stride;
  uint num_bins;
  uint segment_length;
  uint num_tokens;
  uint ring_first_slot;
  uint ring_slots;
  uint ring_start;
  uint num_heads;
  uint folded_point;  // N mod M: where the first token lands
  float folded;       // N; its f32 rounding only nudges the weights N / (N + 1)
} push;

void main() {
  const uint items = push.num_heads * push.num_bins * HEAD_DIM;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint dim = item % HEAD_DIM;
    const uint bin = bins[(item / HEAD_DIM) % push.num_bins];
    const uint head = item / (HEAD_DIM * push.num_bins);
    vec2 key_state = key_states[item], value_state = value_states[item];
    uint point = push.folded_point;
    for (uint i = 0; i < push.num_tokens; ++i) {
      const uint slot = push.ring_first_slot + (push.ring_start + i) % push.ring_slots;
      const uint element = (head * push.slot_stride + slot) * HEAD_DIM + dim;
      const float angle = -KVC_TWO_PI * float(kvc_mulmod(bin, point, push.segment_length)) / float(push.segment_length);
      const vec2 twiddle = vec2(cos(angle), sin(angle));
      const float n = push.folded + float(i);
      key_state = (n * key_state + KVC_LOAD_ELEMENT(k_words, KV_F16, element) * twiddle) / (n + 1.0);
      value_state = (n * value_state + KVC_LOAD_ELEMENT(v_words, KV_F16, element) * twiddle) / (n + 1.0);
      point = point + 1u == push.segment_length ? 0u : point + 1u;
    }
    key_states[item] = key_state;
    value_states[item] = value_state;
  }
}
