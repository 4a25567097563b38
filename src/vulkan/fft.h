// VkFFT behind a small interface: this header and fft.cpp are the only code that knows VkFFT.
// A plan is made once per shape and context (plan creation compiles GLSL at run time: 0.2-2 s,
// ../shared/GPU.md) and recorded into any number of submissions. Each plan transforms a buffer
// of its own, bound once: VkFFT keeps one descriptor set per plan and rewrites it when an
// append names another buffer (deciding so by comparing the VkBuffer* it is handed, not the
// buffer), which a command buffer recorded or in flight with the old binding cannot survive.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "vulkan/buffer.h"

namespace kvc::vk {

class Device;
class Recorder;

// `batch` independent complex transforms of `length` points each, f32 (re, im) pairs laid out
// [batch][length]. Any length: VkFFT falls back to Bluestein's algorithm for large primes.
struct FftShape {
  uint32_t length = 0;
  uint32_t batch = 1;
  bool operator<(const FftShape& other) const {
    return std::tie(length, batch) < std::tie(other.length, other.batch);
  }
};

class FftPlan {
 public:
  // Throws Error(KVC_ERROR_UNSUPPORTED) for shapes VkFFT cannot plan.
  FftPlan(Device& device, const FftShape& shape);
  ~FftPlan();
  FftPlan(const FftPlan&) = delete;
  FftPlan& operator=(const FftPlan&) = delete;

  // The plan's data: length * batch complex values, [batch][length], f32 (re, im).
  BufferSlice data() const;
  // In place on data(), unnormalised both ways: forward X[k] = sum_n x[n] e^{-2 pi i k n /
  // length}, inverse with e^{+2 pi i k n / length}.
  void record(Recorder& recorder, bool inverse);
  size_t bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Plans by shape, kept for the life of a context.
class FftPlans {
 public:
  explicit FftPlans(Device& device) : device_(device) {}
  FftPlan& get(const FftShape& shape);
  size_t plans_created() const { return plans_.size(); }

 private:
  Device& device_;
  std::map<FftShape, std::unique_ptr<FftPlan>> plans_;
};

}  // namespace kvc::vk
