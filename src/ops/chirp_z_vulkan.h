// The length-M DFTs of FAEDKV's Vulkan ops (segment_spectrum with chirp_z, spectral_attention)
// as chirp-z transforms over VkFFT plans of f * 2^a points, f = 1, 3, 5 or 7 (vulkan/fft.h,
// ChirpFilter): the plans serve every M of the same padded length P, so a prompt of a new length plans
// nothing when its P was seen before (planning a VkFFT transform costs 0.2-0.3 s of host time
// on the H100). Only the bins of a span (ops/bin_span.h) are formed, or taken as input, so P
// holds M + span - 1 points (FAEDKV's default chunks at M = 32707: 40960 points, not 65536).
// Each span has a filter of its own (P points), and spans of other lengths may take plans of
// other lengths: FAEDKV layers whose chosen chunks differ (a caller's table) hold one each.
// The kernels around the transform premultiply by a chirp and zero-pad (the ops' pack and
// expand passes) and postmultiply at the points they read (their unpack, softmax and value
// sum); between them record_chirp_dft convolves.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "ops/bin_span.h"
#include "vulkan/fft.h"

namespace kvc::ops {

struct ChirpTransform {
  std::shared_ptr<vk::FftPlan> plan;        // P points, the caller's sequences: the work buffer
  std::shared_ptr<vk::ChirpFilter> filter;  // M's and the span's chirps, the span's filter
};

// The plan and the filter for `batch` DFTs of `length` points at the bins of `span` (count 0:
// all), made now where missing.
ChirpTransform chirp_transform(Backend& backend, uint32_t length, BinSpan span, uint32_t batch);

// For every sequence of transform.plan->data(), zero-padded to P, forward (`from_span` false):
// inputs at points n < M times chirp(), outputs at points j < S that, times span_chirp()[j],
// are the sequence's length-M DFT at bin first + j. From the span: inputs at points j < S (the
// bins first + j) times span_chirp(), outputs at points n < M that, times chirp()[n], are the
// DFT at n of a sequence whose other bins are zero.
void record_chirp_dft(vk::Recorder& recorder, const ChirpTransform& transform, bool from_span);

}  // namespace kvc::ops
