#version 450
// FourierAttention decode, pass 1 (ops/fourier_attention.h): workgroup (split, kv head, block
// of query heads) attends to tiles split, split + num_splits, ... of the kv head's tokens,
// full rows first, then the middle, and writes a flash-decoding partial (m, l, accumulator) per
// query head for attention_merge. A tile's keys and values are rebuilt in shared memory:
// full rows read (keys rotated to their positions), middle rows' uncompressed dims scattered
// from the packed rows and compressed dims summed from the coefficients (eq. 5) with
// appendix D's affine map; cos and sin of each (bin, token) of the tile are computed once
// per chunk of bins and shared by every compressed dim of K and V. Then each query head's
// online softmax takes the tile.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint GROUP_BLOCK = 4;  // query heads per workgroup
layout(constant_id = 3) const uint TILE = 16;        // tokens per tile
layout(constant_id = 4) const bool KV_F16 = false;
layout(constant_id = 5) const uint ROPE_STYLE = 0;
layout(constant_id = 6) const uint ROTARY_DIMS = 0;
layout(constant_id = 7) const uint BIN_CHUNK = 32;   // bins whose cos and sin a tile holds at once

#include "elements.glsl"
#include "rope.glsl"
#include "fourier_turn.glsl"

layout(binding = 0) readonly buffer Query { uint q_words[]; };
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Values { uint v_words[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) readonly buffer Turns { uvec2 turns[]; };
layout(binding = 5) readonly buffer KeyMiddle { uint k_middle[]; };
layout(binding = 6) readonly buffer ValueMiddle { uint v_middle[]; };
layout(binding = 7) readonly buffer KeyDims { uint k_dims[]; };
layout(binding = 8) readonly buffer ValueDims { uint v_dims[]; };
layout(binding = 9) readonly buffer KeyCoefficients { float k_coefficients[]; };
layout(binding = 10) readonly buffer ValueCoefficients { float v_coefficients[]; };
layout(binding = 11) readonly buffer KeyAffine { float k_affine[]; };
layout(binding = 12) readonly buffer ValueAffine { float v_affine[]; };
layout(binding = 13) writeonly buffer Partials { float partials[]; };  // [num_q_heads][num_splits][HEAD_DIM + 2]

layout(push_constant) uniform Push {
  uint num_full_slots;
  uint slot_stride;
  uint query_position;
  uint num_middle;
  uint middle_stride;
  uint num_states;
  uint window_length;
  uint k_compressed;
  uint v_compressed;
  uint num_splits;
  uint group_size;
  float scale;  // 1 / sqrt(HEAD_DIM)
} push;

const uint WG = gl_WorkGroupSize.x;

shared float q_s[GROUP_BLOCK * HEAD_DIM];
shared float k_s[TILE * HEAD_DIM];
shared float v_s[TILE * HEAD_DIM];
shared vec2 basis_s[TILE * BIN_CHUNK];  // (cos, sin) of [token][bin of the chunk]
shared float p_s[GROUP_BLOCK * TILE];
shared float acc_s[GROUP_BLOCK * HEAD_DIM];
shared float m_s[GROUP_BLOCK];
shared float l_s[GROUP_BLOCK];
shared float correction_s[GROUP_BLOCK];

// Element d of a row whose elements are `row_element` on, rotated to `position` when d is
// a rotary dim (the partner is read from the same row).
float rotated_element(uint row_element, uint d, uint position, bool is_query) {
  const float x = is_query ? KVC_LOAD_ELEMENT(q_words, KV_F16, row_element + d) : KVC_LOAD_ELEMENT(k_words, KV_F16, row_element + d);
  if (ROPE_STYLE == 0 || d >= ROTARY_DIMS) return x;
  uint pair, partner_d;
  bool first;
  if (ROPE_STYLE == 2) {
    pair = d / 2;
    partner_d = d ^ 1u;
    first = (d & 1u) == 0;
  } else {
    const uint half_dims = ROTARY_DIMS / 2;
    first = d < half_dims;
    pair = first ? d : d - half_dims;
    partner_d = first ? d + half_dims : d - half_dims;
  }
  const float partner = is_query ? KVC_LOAD_ELEMENT(q_words, KV_F16, row_element + partner_d)
                                 : KVC_LOAD_ELEMENT(k_words, KV_F16, row_element + partner_d);
  return rope_rotate_element(x, partner, rope_cos_sin(position, turns[pair]), first);
}

// Writes the middle tile starting at token `first` into k_s and v_s; `tokens` of it are real.
void rebuild_middle(uint kv_head, uint first, uint tokens) {
  const uint t = gl_LocalInvocationID.x;
  const uint k_kept = HEAD_DIM - push.k_compressed, v_kept = HEAD_DIM - push.v_compressed;
  const uint dims_base = kv_head * HEAD_DIM;
  const uint rows = kv_head * push.middle_stride + first;
  // Uncompressed dims from the packed rows; compressed ones start at 0 and take the sums.
  for (uint e = t; e < TILE * HEAD_DIM; e += WG) {
    const uint j = e / HEAD_DIM, u = e % HEAD_DIM;
    const bool real = j < tokens;
    if (u < k_kept)
      k_s[j * HEAD_DIM + k_dims[dims_base + push.k_compressed + u]] =
          real ? KVC_LOAD_ELEMENT(k_middle, KV_F16, (rows + j) * k_kept + u) : 0.0;
    else
      k_s[j * HEAD_DIM + k_dims[dims_base + u - k_kept]] = 0.0;
    if (u < v_kept)
      v_s[j * HEAD_DIM + v_dims[dims_base + push.v_compressed + u]] =
          real ? KVC_LOAD_ELEMENT(v_middle, KV_F16, (rows + j) * v_kept + u) : 0.0;
    else
      v_s[j * HEAD_DIM + v_dims[dims_base + u - v_kept]] = 0.0;
  }
  // Items (token, compressed dim) of K then V; each thread keeps the same items across chunks.
  const uint items = TILE * (push.k_compressed + push.v_compressed);
  const uint k_coefficient_base = kv_head * 2 * push.num_states * push.k_compressed;
  const uint v_coefficient_base = kv_head * 2 * push.num_states * push.v_compressed;
  for (uint chunk = 0; chunk < push.num_states; chunk += BIN_CHUNK) {
    barrier();  // the previous chunk's basis is used up (and the scatter above is done)
    for (uint e = t; e < TILE * BIN_CHUNK; e += WG) {
      const uint j = e / BIN_CHUNK, n = chunk + e % BIN_CHUNK;
      basis_s[e] = n < push.num_states && j < tokens
                       ? kvc_turn_cos_sin(kvc_mul_mod(n, first + j, push.window_length), push.window_length)
                       : vec2(0.0);
    }
    barrier();
    const uint chunk_bins = min(BIN_CHUNK, push.num_states - chunk);
    for (uint item = t; item < items; item += WG) {
      const bool is_key = item < TILE * push.k_compressed;
      const uint local = is_key ? item : item - TILE * push.k_compressed;
      const uint compressed = is_key ? push.k_compressed : push.v_compressed;
      const uint j = local / compressed, c = local % compressed;
      float sum = 0.0;
      for (uint b = 0; b < chunk_bins; ++b) {
        const vec2 basis = basis_s[j * BIN_CHUNK + b];
        const uint row = 2 * (chunk + b);
        sum += is_key ? basis.x * k_coefficients[k_coefficient_base + row * compressed + c] +
                            basis.y * k_coefficients[k_coefficient_base + (row + 1) * compressed + c]
                      : basis.x * v_coefficients[v_coefficient_base + row * compressed + c] +
                            basis.y * v_coefficients[v_coefficient_base + (row + 1) * compressed + c];
      }
      if (is_key) k_s[j * HEAD_DIM + k_dims[dims_base + c]] += sum;
      else v_s[j * HEAD_DIM + v_dims[dims_base + c]] += sum;
    }
  }
  barrier();
  for (uint item = t; item < items; item += WG) {
    const bool is_key = item < TILE * push.k_compressed;
    const uint local = is_key ? item : item - TILE * push.k_compressed;
    const uint compressed = is_key ? push.k_compressed : push.v_compressed;
    const uint j = local / compressed, c = local % compressed;
    if (j >= tokens) continue;
    if (is_key) {
      const uint at = j * HEAD_DIM + k_dims[dims_base + c];
      k_s[at] = k_affine[2 * kv_head * push.k_compressed + c] * k_s[at] + k_affine[(2 * kv_head + 1) * push.k_compressed + c];
    } else {
      const uint at = j * HEAD_DIM + v_dims[dims_base + c];
      v_s[at] = v_affine[2 * kv_head * push.v_compressed + c] * v_s[at] + v_affine[(2 * kv_head + 1) * push.v_compressed + c];
    }
  }
}

void main() {
  const uint split = gl_WorkGroupID.x;
  const uint kv_head = gl_WorkGroupID.y;
  const uint q_head0 = kv_head * push.group_size + gl_WorkGroupID.z * GROUP_BLOCK;
  const uint t = gl_LocalInvocationID.x;

  for (uint e = t; e < GROUP_BLOCK * HEAD_DIM; e += WG) {
    const uint g = e / HEAD_DIM, d = e % HEAD_DIM;
    q_s[e] = rotated_element((q_head0 + g) * HEAD_DIM, d, push.query_position, true) * push.scale;
    acc_s[e] = 0.0;
  }
  if (t < GROUP_BLOCK) {
    m_s[t] = KVC_NEG_INF;
    l_s[t] = 0.0;
  }

  const uint full_tiles = (push.num_full_slots + TILE - 1) / TILE;
  const uint tiles = full_tiles + (push.num_middle + TILE - 1) / TILE;
  for (uint tile = split; tile < tiles; tile += push.num_splits) {
    barrier();  // the previous tile is used up
    uint tokens;
    if (tile < full_tiles) {
      const uint first = tile * TILE;
      tokens = min(TILE, push.num_full_slots - first);
      for (uint e = t; e < TILE * HEAD_DIM; e += WG) {
        const uint j = e / HEAD_DIM, d = e % HEAD_DIM;
        const uint slot = kv_head * push.slot_stride + first + j;
        const bool real = j < tokens;
        k_s[e] = real ? rotated_element(slot * HEAD_DIM, d, uint(positions[slot]), false) : 0.0;
        v_s[e] = real ? KVC_LOAD_ELEMENT(v_words, KV_F16, slot * HEAD_DIM + d) : 0.0;
      }
    } else {
      const uint first = (tile - full_tiles) * TILE;
      tokens = min(TILE, push.num_middle - first);
      rebuild_middle(kv_head, first, tokens);
    }
    barrier();

    // Logits: one (head, token) per thread.
    for (uint e = t; e < GROUP_BLOCK * TILE; e += WG) {
      const uint g = e / TILE, j = e % TILE;
      float dot_value = 0.0;
      for (uint d = 0; d < HEAD_DIM; ++d) dot_value += q_s[g * HEAD_DIM + d] * k_s[j * HEAD_DIM + d];
      p_s[e] = j < tokens ? dot_value : KVC_NEG_INF;
    }
    barrier();
    if (t < GROUP_BLOCK) {
      float tile_max = KVC_NEG_INF;
      for (uint j = 0; j < tokens; ++j) tile_max = max(tile_max, p_s[t * TILE + j]);
      const float m_new = max(m_s[t], tile_max);
      const float correction = exp(m_s[t] - m_new);
      float sum = 0.0;
      for (uint j = 0; j < TILE; ++j) {
        const float p = j < tokens ? exp(p_s[t * TILE + j] - m_new) : 0.0;
        p_s[t * TILE + j] = p;
        sum += p;
      }
      l_s[t] = l_s[t] * correction + sum;
      m_s[t] = m_new;
      correction_s[t] = correction;
    }
    barrier();
    for (uint e = t; e < GROUP_BLOCK * HEAD_DIM; e += WG) {
      const uint g = e / HEAD_DIM, d = e % HEAD_DIM;
      float sum = 0.0;
      for (uint j = 0; j < tokens; ++j) sum += p_s[g * TILE + j] * v_s[j * HEAD_DIM + d];
      acc_s[e] = acc_s[e] * correction_s[g] + sum;
    }
  }
  barrier();
  for (uint e = t; e < GROUP_BLOCK * (HEAD_DIM + 2); e += WG) {
    const uint g = e / (HEAD_DIM + 2), i = e % (HEAD_DIM + 2);
    const uint base = ((q_head0 + g) * push.num_splits + split) * (HEAD_DIM + 2);
    partials[base + i] = i == 0 ? m_s[g] : (i == 1 ? l_s[g] : acc_s[g * HEAD_DIM + i - 2]);
  }
}
