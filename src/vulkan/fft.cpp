// The VkFFT translation unit. It includes the build tree's patched copy of vkFFT.h
// (cmake/Dependencies.cmake) after volk, so VkFFT's Vulkan calls go through volk's loader.
#include "vulkan/fft.h"

#include <chrono>
#include <cstdio>
#include <string>

#include <vkFFT.h>

#include "vulkan/device.h"
#include "vulkan/faults.h"
#include "vulkan/profile.h"
#include "vulkan/recorder.h"

namespace kvc::vk {
namespace {

// VkFFT's failures as a kvc_status: a shape it has no kernels for is unsupported; a failed
// host or Vulkan allocation is out of memory; any other failed Vulkan call is a Vulkan error.
kvc_status plan_failure_status(VkFFTResult result) {
  switch (result) {
    case VKFFT_ERROR_MALLOC_FAILED:
    case VKFFT_ERROR_FAILED_TO_ALLOCATE:
    case VKFFT_ERROR_FAILED_TO_ALLOCATE_MEMORY:
    case VKFFT_ERROR_FAILED_TO_ALLOCATE_COMMAND_BUFFERS:
    case VKFFT_ERROR_FAILED_TO_ALLOCATE_DESCRIPTOR_SETS:
      return KVC_ERROR_OUT_OF_MEMORY;
    default:
      return result >= VKFFT_ERROR_FAILED_TO_ALLOCATE ? KVC_ERROR_VULKAN : KVC_ERROR_UNSUPPORTED;
  }
}

// VkFFT 1.2.26 (Debian 12's, the version cmake/Dependencies.cmake patches) plans the inverse
// convolution of a Bluestein axis that takes more than one upload (a large prime length such
// as 5003) into inverseBluesteinAxes[axis][1..], and its deleteVkFFT never deletes those: each
// left a pipeline, its layouts, a descriptor pool and set alive until vkDestroyDevice, where
// the validation layer reported them. Later VkFFT deletes them in deleteVkFFT, the same way.
// deleteAxis zeroes what it destroys and leaves the twiddle table to the forward axis that
// owns it (referenceLUT); an axis never planned holds null handles.
void delete_inverse_bluestein_axes(VkFFTApplication& app) {
  for (VkFFTPlan* plan : {app.localFFTPlan, app.localFFTPlan_inverse}) {
    if (!plan) continue;
    for (uint64_t axis = 0; axis < app.configuration.FFTdim; ++axis) {
      if (!app.useBluesteinFFT[axis]) continue;
      for (uint64_t upload = 1; upload < plan->numAxisUploads[axis]; ++upload)
        deleteAxis(&app, &plan->inverseBluesteinAxes[axis][upload]);
    }
  }
}

}  // namespace

struct FftPlan::Impl {
  VkFFTApplication app{};
  VkDevice device = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  uint64_t buffer_bytes = 0;
  std::unique_ptr<Buffer> data;
  VkBuffer data_handle = VK_NULL_HANDLE;  // VkFFT keeps a pointer to this
  std::string label;                      // KVC_PROFILE's name for its commands
};

FftPlan::FftPlan(Device& device, const FftShape& shape) : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
  impl.device = device.device();
  impl.physical_device = device.physical_device();
  impl.queue = device.queue();
  impl.buffer_bytes = uint64_t(shape.length) * shape.batch * 2 * sizeof(float);
  impl.label = "fft " + std::to_string(shape.batch) + " x " + std::to_string(shape.length);
  impl.data = std::make_unique<Buffer>(device, impl.buffer_bytes, MemoryKind::DeviceLocal);
  impl.data_handle = impl.data->handle();
  // VkFFT uploads its lookup tables at init through its own pool and fence.
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.queueFamilyIndex = device.queue_family();
  check(vkCreateCommandPool(impl.device, &pool_info, nullptr, &impl.pool), "vkCreateCommandPool");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(impl.device, &fence_info, nullptr, &impl.fence), "vkCreateFence");

  VkFFTConfiguration config{};
  config.FFTdim = 1;
  config.size[0] = shape.length;
  config.numberBatches = shape.batch;
  config.device = &impl.device;
  config.physicalDevice = &impl.physical_device;
  config.queue = &impl.queue;
  config.commandPool = &impl.pool;
  config.fence = &impl.fence;
  config.bufferSize = &impl.buffer_bytes;
  const auto planning_start = std::chrono::steady_clock::now();
  // initializeVkFFT releases what it made before it fails.
  const VkFFTResult result = faults::injected(faults::Op::CreatePipeline) != VK_SUCCESS ? VKFFT_ERROR_FAILED_TO_CREATE_PIPELINE
                                                                                        : initializeVkFFT(&impl.app, config);
  // Planning compiles VkFFT's kernels on the host: KVC_PROFILE names that cost too.
  if (profiling_enabled())
    std::fprintf(stderr, "kvc profile: planned %s in %.1f ms (host)\n", impl.label.c_str(),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - planning_start).count());
  if (result != VKFFT_SUCCESS) {
    vkDestroyFence(impl.device, impl.fence, nullptr);
    vkDestroyCommandPool(impl.device, impl.pool, nullptr);
    throw Error(plan_failure_status(result), "VkFFT cannot plan " + std::to_string(shape.batch) + " transforms of length " +
                                                 std::to_string(shape.length) + " (VkFFTResult " + std::to_string(static_cast<int>(result)) + ")");
  }
}

FftPlan::~FftPlan() {
  delete_inverse_bluestein_axes(impl_->app);
  deleteVkFFT(&impl_->app);
  vkDestroyFence(impl_->device, impl_->fence, nullptr);
  vkDestroyCommandPool(impl_->device, impl_->pool, nullptr);
}

BufferSlice FftPlan::data() const { return {impl_->data.get(), 0, impl_->buffer_bytes}; }

size_t FftPlan::bytes() const { return impl_->buffer_bytes; }

void FftPlan::record(Recorder& recorder, bool inverse) {
  VkCommandBuffer commands = recorder.raw_commands(impl_->label);
  VkFFTLaunchParams launch{};
  launch.commandBuffer = &commands;
  // The same VkBuffer* every time: VkFFT binds data() at the first append and never again.
  launch.buffer = &impl_->data_handle;
  const VkFFTResult result = VkFFTAppend(&impl_->app, inverse ? 1 : -1, &launch);
  require(result == VKFFT_SUCCESS, KVC_ERROR_VULKAN, "VkFFTAppend failed (VkFFTResult " + std::to_string(static_cast<int>(result)) + ")");
}

std::shared_ptr<FftPlan> FftPlans::keep(const FftShape& shape) {
  auto it = plans_.find(shape);
  if (it == plans_.end()) it = plans_.emplace(shape, std::make_shared<FftPlan>(device_, shape)).first;
  return it->second;
}

void FftPlans::trim() {
  for (auto it = plans_.begin(); it != plans_.end();) it = it->second.use_count() == 1 ? plans_.erase(it) : std::next(it);
}

}  // namespace kvc::vk
