#version 450
// Window scores, HitKV's hits (Definition 1), step 1 of 2: one workgroup per (query head,
// window query) row finds the rank-K boundary of the row's prefix logits (the ranking by
// probability is the ranking by logit): the K-th largest logit T as an ordered key and, when
// more keys equal T than the top K take, the position of the last one taken (earlier
// positions first). window_sum then counts a hit for slot s of row r when its key exceeds T,
// or equals it at a position up to that one: no index lists and no scatter of hits.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;

#include "elements.glsl"

layout(binding = 0) readonly buffer Logits { uint logit_bits[]; };  // [rows][num_prefix]
layout(binding = 1) writeonly buffer Bounds { uvec2 bounds[]; };    // [rows] (T's key, last tied position taken)

layout(push_constant) uniform Push {
  uint num_prefix;
  uint hit_k;
} push;

uint base;  // the row's first logit

uint select_key(uint i) { return kvc_ordered_key(logit_bits[base + i]); }

#include "workgroup_scan.glsl"
#include "radix_select.glsl"

void main() {
  const uint thread = gl_LocalInvocationID.x;
  const uint row = gl_WorkGroupID.x;
  base = row * push.num_prefix;
  const RadixSelection selection = radix_select(push.num_prefix, push.hit_k);
  if (selection.equal_count == selection.needed_equal) {  // every key equal to T is a hit
    if (thread == 0u) bounds[row] = uvec2(selection.threshold, 0xffffffffu);
    return;
  }
  // Ties cut: the position of the needed_equal-th key equal to T, scanning tiles in order.
  uint counted = 0u;
  for (uint tile = 0u; tile < push.num_prefix && counted < selection.needed_equal; tile += gl_WorkGroupSize.x) {
    const uint i = tile + thread;
    const uint equal = i < push.num_prefix && select_key(i) == selection.threshold ? 1u : 0u;
    const uint equal_before = workgroup_inclusive_sum(equal);
    if (equal == 1u && counted + equal_before == selection.needed_equal) bounds[row] = uvec2(selection.threshold, i);
    counted += workgroup_scan_total();
    barrier();  // the scan is rewritten by the next tile
  }
}
