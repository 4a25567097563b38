// RoPE (Su et al., RoFormer): rotate each pair of head dimensions by position * theta^(-2i/r).
// Keys are stored before RoPE and rotated by the position their slot carries when attention
// reads them, or rotated as they are appended where the policy never changes positions
// (append_rows); queries are rotated (and scaled) once per attention call by this op.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

struct RopeParams {
  kvc_rope_style style = KVC_ROPE_NONE;
  uint32_t rotary_dims = 0;  // even, <= head_dim
  double theta = 10000.0;

  bool enabled() const { return style != KVC_ROPE_NONE && rotary_dims > 0; }
  bool operator==(const RopeParams& other) const {
    return style == other.style && rotary_dims == other.rotary_dims && theta == other.theta;
  }
};

// The shaders' ROPE_STYLE constant: 0 none, 1 NeoX, 2 interleaved.
inline uint32_t rope_style_constant(const RopeParams& rope) {
  return rope.enabled() ? static_cast<uint32_t>(rope.style) : 0u;
}

// inv_freq[i] = theta^(-2i / rotary_dims) for each of the rotary_dims / 2 pairs.
std::vector<double> rope_inverse_frequencies(const RopeParams& rope);

// The table the shaders read: per pair, inv_freq / (2 pi) as a 64-bit fixed-point fraction of
// a turn (high word, low word). Multiplying it by an integer position in integer arithmetic
// gives the angle modulo one turn exactly, so large positions lose no precision on the GPU.
std::vector<uint32_t> rope_turn_table(const RopeParams& rope);

// The two dims rotated together as pair `pair`.
inline void rope_pair_dims(const RopeParams& rope, uint32_t pair, uint32_t& first, uint32_t& second) {
  if (rope.style == KVC_ROPE_NEOX) {
    first = pair;
    second = pair + rope.rotary_dims / 2;
  } else {
    first = 2 * pair;
    second = 2 * pair + 1;
  }
}

// Rotates one head's row of head_dim floats in place to `position` (CPU, double trig).
void rope_rotate_row(const RopeParams& rope, const std::vector<double>& inv_freq, float* row, int64_t position);

struct RopeShape {
  uint32_t num_tokens = 0;
  uint32_t num_heads = 0;
  uint32_t head_dim = 0;
  Dtype dtype = Dtype::F32;  // of the input
  RopeParams rope;
  float out_scale = 1.0f;    // folded into the output (attention passes 1/sqrt(head_dim))
  // Of the output: F32 for queries; F16 for keys that a cooperative-matrix kernel reads
  // pre-rotated (it rounds them to f16 anyway, so f32 would only double the scratch).
  Dtype out_dtype = Dtype::F32;
};

// out ([num_tokens][num_heads][head_dim] in out_dtype) = out_scale * RoPE(in, positions[token]).
// `in` is [num_tokens][num_heads][head_dim] in shape.dtype; positions are int32 [num_tokens].
// turn_table holds rope_turn_table(shape.rope) (Vulkan only; the CPU computes its own).
struct RopeArgs {
  View in;
  View positions;
  View turn_table;
  View out;
};

void rope(Backend& backend, const RopeShape& shape, const RopeArgs& args);
void rope_cpu(const RopeShape& shape, const RopeArgs& args);
void rope_vulkan(Backend& backend, const RopeShape& shape, const RopeArgs& args);

}  // namespace kvc::ops
