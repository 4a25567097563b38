// The VkFFT translation unit. It includes the build tree's patched copy of vkFFT.h
// (cmake/Dependencies.cmake) after volk, so VkFFT's Vulkan calls go through volk's loader.
#include "vulkan/fft.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <vkFFT.h>

#include "vulkan/device.h"
#include "vulkan/faults.h"
#include "vulkan/profile.h"
#include "vulkan/recorder.h"

namespace kvc::vk {
namespace {

bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

// The odd factors of chirp_padded_length's plan lengths, f * 2^a: 1.25, 1.5 and 1.75 times a
// power of two fill each octave with four lengths.
constexpr uint64_t kChirpOddFactors[] = {1, 3, 5, 7};

// The plan lengths chirp_padded_length returns.
bool is_chirp_plan_length(uint64_t value) {
  for (uint64_t factor : kChirpOddFactors)
    if (value % factor == 0 && is_power_of_two(value / factor)) return true;
  return false;
}

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
  FftShape shape;
};

FftPlan::FftPlan(Device& device, const FftShape& shape) : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
  impl.device = device.device();
  impl.physical_device = device.physical_device();
  impl.queue = device.queue();
  impl.shape = shape;
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
  // Lengths other than powers of two take their twiddles from tables VkFFT computes in double:
  // its f32 default on every vendor but Intel (lavapipe too) takes them from the device's
  // sin and cos (Vulkan bounds their error only to 2^-11), which put an H200's fit through a
  // prime length (a Bluestein plan) 6x further from the reference than the tables (3.8e-6
  // against 6.3e-7). Powers of two keep the default: the tables measured 3% slower on FAEDKV's
  // 65536-point chirp-z plans, whose tests pass without them. The other chirp-z plans take
  // the tables, whose cost measured alike (H100, FAEDKV's 49152-point prompt transform 60.9 ms
  // without, 62.8 ms with): their precision should not rest on a vendor's sin and cos.
  config.useLUT = (shape.length & (shape.length - 1)) != 0 ? 1 : 0;
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

const FftShape& FftPlan::shape() const { return impl_->shape; }

void FftPlan::record(Recorder& recorder, bool inverse) {
  VkCommandBuffer commands = recorder.raw_commands(impl_->label, data());
  VkFFTLaunchParams launch{};
  launch.commandBuffer = &commands;
  // The same VkBuffer* every time: VkFFT binds data() at the first append and never again.
  launch.buffer = &impl_->data_handle;
  const VkFFTResult result = VkFFTAppend(&impl_->app, inverse ? 1 : -1, &launch);
  require(result == VKFFT_SUCCESS, KVC_ERROR_VULKAN, [&] {
    return "VkFFTAppend failed (VkFFTResult " + std::to_string(static_cast<int>(result)) + ")";
  });
}

uint32_t chirp_padded_length(uint32_t length, uint32_t span) {
  require(length >= 1 && length <= (1u << 30), KVC_ERROR_UNSUPPORTED, [&] {
    return "a chirp-z transform of " + std::to_string(length) + " points; lengths 1 .. 2^30 are transformed";
  });
  require(span >= 1 && span <= length, KVC_ERROR_INTERNAL, [&] {
    return "a chirp-z span of " + std::to_string(span) + " bins of " + std::to_string(length);
  });
  if (length > 1 && is_power_of_two(length)) return length;
  const uint64_t least = std::max<uint64_t>(2, uint64_t(length) + span - 1);  // VkFFT plans no transform of one point
  uint64_t padded = UINT64_MAX;
  for (uint64_t factor : kChirpOddFactors) {
    uint64_t candidate = factor;
    while (candidate < least) candidate *= 2;
    padded = std::min(padded, candidate);
  }
  return uint32_t(padded);
}

namespace {

// One command buffer of the plan's pool, freed on every path.
struct OneTimeCommands {
  VkDevice device;
  VkCommandPool pool;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  OneTimeCommands(VkDevice device_handle, VkCommandPool pool_handle) : device(device_handle), pool(pool_handle) {
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device, &alloc, &commands), "vkAllocateCommandBuffers");
  }
  ~OneTimeCommands() { vkFreeCommandBuffers(device, pool, 1, &commands); }
  OneTimeCommands(const OneTimeCommands&) = delete;
  OneTimeCommands& operator=(const OneTimeCommands&) = delete;

  // Ends the recording, submits it and waits for it. A failed wait returns only once the queue
  // is idle (or lost): the destructor and the caller's unwinding free what the work uses.
  void submit_and_wait(VkQueue queue, VkFence fence) {
    check(vkEndCommandBuffer(commands), "vkEndCommandBuffer");
    check(vkResetFences(device, 1, &fence), "vkResetFences");
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &commands;
    VkResult result = faults::injected(faults::Op::QueueSubmit);
    if (result == VK_SUCCESS) result = vkQueueSubmit(queue, 1, &submit, fence);
    check(result, "vkQueueSubmit");
    result = faults::injected(faults::Op::WaitForFences);
    if (result == VK_SUCCESS) result = vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX);
    if (result != VK_SUCCESS) vkQueueWaitIdle(queue);
    check(result, "vkWaitForFences");
  }

  void barrier(VkPipelineStageFlags src_stages, VkAccessFlags src_access, VkPipelineStageFlags dst_stages, VkAccessFlags dst_access) {
    VkMemoryBarrier memory{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    memory.srcAccessMask = src_access;
    memory.dstAccessMask = dst_access;
    vkCmdPipelineBarrier(commands, src_stages, dst_stages, 0, 1, &memory, 0, nullptr, 0, nullptr);
  }
};

// e^{sign pi i (n^2 mod 2M) / M} / divisor in double, rounded to f32 (re, im): c[n] for sign -1,
// conj(c[n]) for +1.
void chirp_point(uint64_t n, uint64_t length, double sign, double divisor, float* out) {
  const double angle = sign * M_PI * double(n * n % (2 * length)) / double(length);
  out[0] = float(std::cos(angle) / divisor);
  out[1] = float(std::sin(angle) / divisor);
}

}  // namespace

ChirpFilter::ChirpFilter(Device& device, uint32_t length, uint32_t span_first, uint32_t span, FftPlan& plan)
    : length_(length), span_first_(span_first), span_(span), padded_length_(chirp_padded_length(length, span)) {
  if (direct()) {  // the plan's transform gives every bin from 0
    span_first_ = 0;
    span_ = length_;
  }
  FftPlan::Impl& impl = *plan.impl_;
  require(impl.shape.length == padded_length_ && span_first_ < length_, KVC_ERROR_INTERNAL, [&] {
    return "the chirp filter of " + std::to_string(length) + " points, bins " + std::to_string(span_first) + " .. + " +
         std::to_string(span) + ", needs a plan of " + std::to_string(padded_length_) + " and a first bin below the length";
  });
  const auto start = std::chrono::steady_clock::now();
  const int64_t M = length_, P = padded_length_, S = span_, first = span_first_;
  const size_t span_offset = span_chirp_offset(), chirp_bytes = span_offset + size_t(S) * 8, filter_bytes = direct() ? 0 : size_t(P) * 8;
  // Staged: the chirps c[n] (n < M) and c[k0 + j] (j < S), then the filter's time domain h[m] =
  // conj(c[k0 + m]) at point m mod P for -M < m < S (c is even, so c[-n] = c[n]), divided by P.
  Buffer staging(device, chirp_bytes + filter_bytes, MemoryKind::HostVisible);
  float* const host = static_cast<float*>(staging.mapped());
  std::memset(host, 0, chirp_bytes + filter_bytes);
  for (int64_t n = 0; n < M + S; ++n) {
    float* const point = n < M ? host + 2 * n : host + span_offset / 4 + 2 * (n - M);
    if (direct()) point[0] = 1.0f;
    else chirp_point(uint64_t(n < M ? n : first + n - M), uint64_t(M), -1.0, 1.0, point);
  }
  float* const wrapped = host + chirp_bytes / 4;
  for (int64_t m = 1 - M; m < S && !direct(); ++m)
    chirp_point(uint64_t(std::llabs(first + m)), uint64_t(M), 1.0, double(P), wrapped + 2 * ((m + P) % P));
  chirp_ = std::make_unique<Buffer>(device, chirp_bytes, MemoryKind::DeviceLocal);
  if (!direct()) filter_ = std::make_unique<Buffer>(device, filter_bytes, MemoryKind::DeviceLocal);

  OneTimeCommands once(impl.device, impl.pool);
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(once.commands, &begin), "vkBeginCommandBuffer");
  // Earlier submissions may have used plan.data().
  once.barrier(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
               VK_ACCESS_TRANSFER_WRITE_BIT);
  const VkBufferCopy chirp_copy{0, 0, chirp_bytes};
  vkCmdCopyBuffer(once.commands, staging.handle(), chirp_->handle(), 1, &chirp_copy);
  if (!direct()) {
    const VkBufferCopy to_plan{chirp_bytes, 0, filter_bytes};
    vkCmdCopyBuffer(once.commands, staging.handle(), impl.data_handle, 1, &to_plan);
    once.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    VkFFTLaunchParams launch{};
    launch.commandBuffer = &once.commands;
    launch.buffer = &impl.data_handle;
    const VkFFTResult result = VkFFTAppend(&impl.app, -1, &launch);
    require(result == VKFFT_SUCCESS, KVC_ERROR_VULKAN, [&] {
      return "VkFFTAppend failed (VkFFTResult " + std::to_string(static_cast<int>(result)) + ")";
    });
    once.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
    const VkBufferCopy from_plan{0, 0, filter_bytes};  // sequence 0's spectrum; the plan's other sequences are not read
    vkCmdCopyBuffer(once.commands, impl.data_handle, filter_->handle(), 1, &from_plan);
  }
  // What later submissions read of the tables, or write of plan.data(), waits for this.
  once.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
               VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
  once.submit_and_wait(impl.queue, impl.fence);
  if (profiling_enabled())
    std::fprintf(stderr, "kvc profile: chirp filter of %u points, bins %u .. + %u (P = %u) in %.1f ms (host)\n", length_, span_first_,
                 span_, padded_length_,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

ChirpFilter::~ChirpFilter() = default;

BufferSlice ChirpFilter::chirp() const { return {chirp_.get(), 0, uint64_t(length_) * 8}; }

BufferSlice ChirpFilter::span_chirp() const { return {chirp_.get(), span_chirp_offset(), uint64_t(span_) * 8}; }

size_t ChirpFilter::span_chirp_offset() const {
  constexpr size_t kBindingAlignment = 256;  // the largest minStorageBufferOffsetAlignment Vulkan allows
  return (size_t(length_) * 8 + kBindingAlignment - 1) / kBindingAlignment * kBindingAlignment;
}

BufferSlice ChirpFilter::filter() const {
  require(!direct(), KVC_ERROR_INTERNAL, "a direct chirp-z transform has no filter");
  return {filter_.get(), 0, uint64_t(padded_length_) * 8};
}

std::shared_ptr<FftPlan> FftPlans::keep(const FftShape& shape) {
  auto it = plans_.find(shape);
  if (it == plans_.end()) {
    it = plans_.emplace(shape, Held{std::make_shared<FftPlan>(device_, shape)}).first;
    ++plans_made_;
  }
  it->second.last_use = ++uses_;
  return it->second.plan;
}

std::shared_ptr<ChirpFilter> FftPlans::keep_chirp(uint32_t length, uint32_t span_first, uint32_t span, uint32_t batch) {
  const uint32_t padded = chirp_padded_length(length, span);
  std::shared_ptr<FftPlan> plan = keep({padded, batch});
  // Direct (P = M): one filter, of every bin, whatever the span.
  const auto key = padded == length ? std::make_tuple(length, 0u, length) : std::make_tuple(length, span_first, span);
  auto it = filters_.find(key);
  if (it == filters_.end()) it = filters_.emplace(key, std::make_shared<ChirpFilter>(device_, length, span_first, span, *plan)).first;
  return it->second;
}

size_t ChirpFilter::bytes() const { return chirp_->size() + (filter_ ? filter_->size() : 0); }

size_t FftPlans::bytes_held() const {
  size_t bytes = 0;
  for (const auto& held : plans_) bytes += held.second.plan->bytes();
  for (const auto& filter : filters_) bytes += filter.second->bytes();
  return bytes;
}

void FftPlans::trim(size_t retained_bytes) {
  for (auto it = filters_.begin(); it != filters_.end();) it = it->second.use_count() == 1 ? filters_.erase(it) : std::next(it);
  // The unkept chirp-z plans, newest use first, while the budget lasts; every other unkept plan goes.
  std::vector<std::map<FftShape, Held>::iterator> unkept;
  for (auto it = plans_.begin(); it != plans_.end(); ++it)
    if (it->second.plan.use_count() == 1) unkept.push_back(it);
  std::sort(unkept.begin(), unkept.end(), [](const auto& a, const auto& b) { return a->second.last_use > b->second.last_use; });
  size_t retained = 0;
  for (const auto& it : unkept) {
    const size_t bytes = it->second.plan->bytes();
    if (is_chirp_plan_length(it->first.length) && retained + bytes <= retained_bytes) retained += bytes;
    else plans_.erase(it);
  }
}

}  // namespace kvc::vk
