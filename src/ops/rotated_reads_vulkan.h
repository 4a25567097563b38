// What the Vulkan kernels that score queries against stored keys share (attention, window
// scores): the RoPE constants and bindings they take, and the queries rotated to their
// slots' positions and scaled by 1/sqrt(head_dim) once, by the rope op, before they run.
#pragma once

#include <cmath>

#include "ops/rope.h"
#include "ops/vulkan_args.h"

namespace kvc::ops {

struct RopeBindings {
  uint32_t style = 0;        // the shaders' ROPE_STYLE
  uint32_t rotary_dims = 0;  // the shaders' ROTARY_DIMS
  vk::BufferSlice positions, turns;
};

// Without RoPE the position and turn bindings are never read; `k` stands in for them.
inline RopeBindings rope_bindings(const RopeParams& rope, const View& positions, const View& turn_table, const View& k) {
  const uint32_t style = rope_style_constant(rope);
  return {style, style ? rope.rotary_dims : 0u, style ? slice(View{positions.tensor, 0}) : slice(k),
          style ? slice(turn_table) : slice(k)};
}

// q ([num_queries][num_heads][head_dim], dtype) rotated to the positions of the slots from
// first_query_slot on (kv head 0's) and scaled, into q_rot (f32, same layout).
inline void rotate_queries(Backend& backend, const RopeShape& queries, const View& q, const View& positions,
                           uint32_t first_query_slot, const View& turn_table, Tensor& q_rot) {
  RopeShape scaled = queries;
  scaled.out_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(queries.head_dim)));
  const View query_positions{positions.tensor, positions.offset + size_t(first_query_slot) * 4};
  rope_vulkan(backend, scaled, {q, rope_style_constant(queries.rope) ? query_positions : View{}, turn_table, view(q_rot)});
}

}  // namespace kvc::ops
