// A cyclic run of DFT bins: the bins a chirp-z transform forms, or takes as its only nonzero
// inputs in the other direction (vulkan/fft.h, ChirpFilter), so that its padded length need
// hold M + count - 1 points rather than 2 M - 1.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc::ops {

// Bins k = first, first + 1, ..., first + count - 1, taken mod M.
struct BinSpan {
  uint32_t first = 0;
  uint32_t count = 0;  // 0: all M bins
};

// The shortest cyclic run of the M bins that holds every bin of `bins` (each < M) and its
// mirror M - k: a real signal's spectrum is read at both (segment_spectrum's separation of two
// packed spectra, spectral attention's stored bins standing for their mirrors): the circle
// less its widest gap between those bins (the first such gap from bin 0 up, where several tie).
// {0, M} when it takes every bin.
BinSpan mirrored_bin_span(const std::vector<uint32_t>& bins, uint32_t length);

}  // namespace kvc::ops
