// VkFFT behind a small interface: this header and fft.cpp are the only code that knows VkFFT.
// A plan is made once per shape and context (plan creation compiles GLSL at run time: 0.2-2 s,
// ../shared/GPU.md) and recorded into any number of submissions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "vulkan/buffer.h"

namespace kvc::vk {

class Device;
class Recorder;

// `batch` independent f32 transforms of `length` contiguous elements each.
struct DctShape {
  uint32_t length = 0;
  uint32_t batch = 1;
  bool operator<(const DctShape& other) const {
    return std::tie(length, batch) < std::tie(other.length, other.batch);
  }
};

class DctPlan {
 public:
  // Throws Error(KVC_ERROR_UNSUPPORTED) for lengths VkFFT cannot transform in one upload.
  DctPlan(Device& device, const DctShape& shape);
  ~DctPlan();
  DctPlan(const DctPlan&) = delete;
  DctPlan& operator=(const DctPlan&) = delete;

  // In place on `data` (length * batch floats at its offset): VkFFT's unnormalised DCT-II
  // (forward) or DCT-III (inverse); DCT-III(DCT-II(x)) = 2 * length * x.
  void record(Recorder& recorder, BufferSlice data, bool inverse);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Plans by shape, kept for the life of a context.
class DctPlans {
 public:
  explicit DctPlans(Device& device) : device_(device) {}
  DctPlan& get(const DctShape& shape);
  size_t plans_created() const { return plans_.size(); }

 private:
  Device& device_;
  std::map<DctShape, std::unique_ptr<DctPlan>> plans_;
};

}  // namespace kvc::vk
