// The length-M DFTs of FAEDKV's Vulkan ops (segment_spectrum with chirp_z, spectral_attention)
// as chirp-z transforms over power-of-two VkFFT plans (vulkan/fft.h, ChirpFilter): the plans
// serve every M of the same padded length P, so a prompt of a new length plans nothing when its
// P was seen before (planning a VkFFT transform costs 0.2-0.3 s of host time on the H100).
// The kernels around the transform premultiply by the chirp and zero-pad (the ops' pack and
// expand passes) and postmultiply at the points they read (their unpack, softmax and value
// sum); between them record_chirp_dft convolves.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "vulkan/fft.h"

namespace kvc::ops {

struct ChirpTransform {
  std::shared_ptr<vk::FftPlan> plan;        // P points, the caller's sequences: the work buffer
  std::shared_ptr<vk::ChirpFilter> filter;  // M's chirp and filter
};

// The plan and the filter for `batch` DFTs of `length` points, made now where missing.
ChirpTransform chirp_transform(Backend& backend, uint32_t length, uint32_t batch);

// For every sequence of transform.plan->data(), premultiplied by the chirp and zero-padded to
// P: the values that, times the chirp at point k < M, are the sequence's length-M DFT at k.
void record_chirp_dft(vk::Recorder& recorder, const ChirpTransform& transform);

}  // namespace kvc::ops
