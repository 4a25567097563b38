#version 450
// Spectral attention, the value sum, pass 1: item (query row, block of stored bins, dim pair)
// sums w_b Re(S_V[b] conj(P[k_b])) over its block, P the forward transform of the segment's
// probabilities. Blocks of bins spread the sum over the GPU: a row's dims alone are too few
// threads to hide the loads' latency over thousands of bins.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const uint BINS_PER_BLOCK = 64;

layout(binding = 0) readonly buffer ValueStates { vec2 value_states[]; };  // [num_kv_heads][num_bins][HEAD_DIM]
layout(binding = 1) readonly buffer Bins { uint bins[]; };
layout(binding = 2) readonly buffer Spectra { vec2 spectra[]; };           // [rows][segment_length]
layout(binding = 3) writeonly buffer Partials { vec2 partials[]; };         // [rows][num_blocks][HEAD_DIM / 2]

layout(push_constant) uniform Push {
  uint num_bins;
  uint segment_length;
  uint rows;
  uint num_q_heads;
  uint group;
  uint num_blocks;
} push;

void main() {
  const uint pairs = HEAD_DIM / 2u;
  const uint items = push.rows * push.num_blocks * pairs;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint pair = item % pairs;
    const uint block = (item / pairs) % push.num_blocks;
    const uint row = item / (pairs * push.num_blocks);
    const uint kv_head = (row % push.num_q_heads) / push.group;
    vec2 sum = vec2(0.0);
    const uint end = min(push.num_bins, (block + 1u) * BINS_PER_BLOCK);
    for (uint b = block * BINS_PER_BLOCK; b < end; ++b) {
      const uint bin = bins[b];
      const float weight = bin == 0u || 2u * bin == push.segment_length ? 1.0 : 2.0;
      const vec2 p = spectra[row * push.segment_length + bin] * weight;
      const uint state = (kv_head * push.num_bins + b) * HEAD_DIM + 2u * pair;
      sum += vec2(dot(value_states[state], p), dot(value_states[state + 1u], p));
    }
    partials[item] = sum;
  }
}
