#version 450
// Spectral attention, pass 2: the full length-M spectrum of each query row's segment scores,
// from the stored bins' products (a mirror bin takes the conjugate; pruned bins are zero).
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Products { vec2 products[]; };  // [rows][num_bins]
layout(binding = 1) readonly buffer BinMap { uint bin_map[]; };     // spectral_bin_map
layout(binding = 2) writeonly buffer Spectra { vec2 spectra[]; };  // [rows][segment_length]

layout(push_constant) uniform Push {
  uint num_bins;
  uint segment_length;
  uint rows;
} push;

const uint MIRROR = 0x80000000u;
const uint PRUNED = 0xFFFFFFFFu;

void main() {
  const uint items = push.rows * push.segment_length;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint entry = bin_map[item % push.segment_length];
    vec2 value = vec2(0.0);
    if (entry != PRUNED) {
      value = products[(item / push.segment_length) * push.num_bins + (entry & ~MIRROR)];
      if ((entry & MIRROR) != 0u) value.y = -value.y;
    }
    spectra[item] = value;
  }
}
