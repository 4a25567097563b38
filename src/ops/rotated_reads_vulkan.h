// What the Vulkan kernels that score queries against stored keys share (attention, window
// scores): the RoPE constants and bindings they take, the queries rotated to their slots'
// positions and scaled by 1/sqrt(head_dim) once, by the rope op, before they run, and for the
// cooperative-matrix kernels the keys rotated once into f16 scratch.
#pragma once

#include <cmath>

#include "ops/rope.h"
#include "ops/vulkan_args.h"
#include "vulkan/device.h"

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

// Keys a cooperative-matrix kernel reads pre-rotated: kv head h's first num_slots rows at slot
// h * slot_stride of an f16 scratch (the kernels round keys to f16 anyway). Rotating as a kernel
// stages them costs a cos/sin pair per key element per workgroup, and again for every pass over
// them: measured slower for the prefill and the window scores (docs/benchmarks.md).
struct RotatedKeys {
  uint32_t num_kv_heads = 0, num_slots = 0, head_dim = 0;

  // num_slots rounded up so that every head's rows start where a binding may begin.
  uint32_t slot_stride(const vk::Device& device) const {
    const uint64_t alignment = device.properties().limits.minStorageBufferOffsetAlignment;
    const uint64_t row_bytes = uint64_t(head_dim) * sizeof(uint16_t);
    uint32_t stride = num_slots;
    while ((stride * row_bytes) % alignment != 0) ++stride;  // alignment is a power of two <= 256
    return stride;
  }
  uint64_t bytes(const vk::Device& device) const {
    return size_product({num_kv_heads, slot_stride(device), head_dim, sizeof(uint16_t)});
  }
  // Whether rotate_keys can make them: one binding must cover the rotated keys (the rope op
  // reads each kv head's at any offset).
  bool possible(const Backend& backend) const { return bytes(backend.device()) <= backend.tensor_limit().bytes; }
};

// k ([num_kv_heads][k_slot_stride][head_dim], dtype) rotated to positions (int32, the same
// layout) into the RotatedKeys scratch as `keys` describes, one rope dispatch per kv head.
inline View rotate_keys(Backend& backend, const RotatedKeys& keys, uint32_t k_slot_stride, Dtype dtype, const RopeParams& rope,
                        const View& k, const View& positions, const View& turn_table) {
  const vk::Device& device = backend.device();
  Tensor& rotated = backend.scratch(ScratchId::RotatedKeys, keys.bytes(device));
  const size_t head_bytes = size_t(keys.slot_stride(device)) * keys.head_dim * sizeof(uint16_t);
  const RopeShape rope_shape{keys.num_slots, 1, keys.head_dim, dtype, rope, 1.0f, Dtype::F16};
  for (uint32_t kv_head = 0; kv_head < keys.num_kv_heads; ++kv_head) {
    const size_t first = size_t(kv_head) * k_slot_stride;
    rope_vulkan(backend, rope_shape,
                {View{k.tensor, k.offset + first * keys.head_dim * dtype_size(dtype)},
                 View{positions.tensor, positions.offset + first * sizeof(int32_t)}, turn_table, View{&rotated, kv_head * head_bytes}});
  }
  return view(rotated);
}

}  // namespace kvc::ops
