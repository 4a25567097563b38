#version 450
// Spectral attention, pass 2: the full length-M spectrum of each query row's segment scores,
// from the stored bins' products (a mirror bin takes the conjugate; pruned bins are zero).
// Each spectrum is Hermitian, so its inverse transform is real: rows 2s and 2s + 1 share
// sequence s as Z = A + i B, whose inverse transform is then a_2s + i a_2s+1 (an odd last row
// pairs with zero). Bins 0 and M/2 are their own mirrors: a stored state there stands for
// Re(S e^{...}) (ops/spectral_attention.h), so only the real part of its product enters.
// The inverse transform is taken as the conjugate of a forward one, IDFT(Z) = conj DFT(conj Z),
// a chirp-z transform from the span (ops/chirp_z_vulkan.h; every nonzero bin lies in it): point
// j < span of the sequence holds conj(Z[k]) times the span's chirp c[span_first + j], k =
// span_first + j mod M, points span .. P - 1 zero.
#extension GL_GOOGLE_include_directive : require
#include "bin_span.glsl"
#include "complex.glsl"

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Products { vec2 products[]; };  // [rows][num_bins]
layout(binding = 1) readonly buffer BinMap { uint bin_map[]; };     // spectral_bin_map
layout(binding = 2) writeonly buffer Spectra { vec2 spectra[]; };  // [(rows + 1) / 2][padded_length]
layout(binding = 3) readonly buffer SpanChirp { vec2 span_chirp[]; };  // [span]

layout(push_constant) uniform Push {
  uint num_bins;
  uint segment_length;
  uint rows;
  uint padded_length;
  uint span_first;
  uint span;
} push;

const uint MIRROR = 0x80000000u;
const uint PRUNED = 0xFFFFFFFFu;

vec2 row_spectrum(uint row, uint k, uint entry) {
  if (entry == PRUNED || row >= push.rows) return vec2(0.0);
  const vec2 value = products[row * push.num_bins + (entry & ~MIRROR)];
  if (k == 0u || 2u * k == push.segment_length) return vec2(value.x, 0.0);
  return (entry & MIRROR) != 0u ? conjugate(value) : value;
}

void main() {
  const uint items = (push.rows + 1u) / 2u * push.padded_length;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint j = item % push.padded_length, sequence = item / push.padded_length;
    if (j >= push.span) {
      spectra[item] = vec2(0.0);
      continue;
    }
    const uint k = span_bin(j, push.span_first, push.segment_length);
    const uint entry = bin_map[k];
    const vec2 a = row_spectrum(2u * sequence, k, entry), b = row_spectrum(2u * sequence + 1u, k, entry);
    spectra[item] = complex_mul(conjugate(a + times_i(b)), span_chirp[j]);
  }
}
