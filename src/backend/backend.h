// Where ops run: the CPU (the reference, and a real fallback) or one Vulkan device.
// An operation brackets its work with begin() ... submit(): uploads, ops, downloads. Outside a
// step that records, submits and waits; inside a step (begin_step ... end_step, the public
// kvc_step_*) it only records, and the step's one submission runs every operation's work in
// order. On the CPU everything runs at once and submissions are no-ops.
//
// On Vulkan an operation (outside a step) or a step is a transaction: what it changes on the
// host while recording (a cache's bookkeeping, its policy's state) belongs to device work that
// runs only if the submission happens. Each Participant that an operation changes joins
// (enlist) and saves its state first; when the work is not submitted (a failure part way, a
// failed submission) every participant gets its saved state back, so a failed call changes
// nothing; once submitted, the saved states are dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/size_limits.h"

namespace kvc {

namespace vk {
class Buffer;
class FftPlans;
class Device;
class Recorder;
struct BufferSlice;
}  // namespace vk

class Backend;
class Tensor;

// Host state that recorded device work changes (see the top of this file).
class Participant {
 public:
  virtual void save() = 0;          // keeps a copy of the state
  virtual void restore() = 0;       // puts the copy back and drops it
  virtual void forget_saved() = 0;  // drops the copy
 protected:
  ~Participant() = default;
};

// Work an operation inside a step leaves for the step's end, where one dispatch takes what many
// operations left (a decode step's evictions, every layer's at once: ops/decode_evict.h).
class StepEndWork {
 public:
  virtual void record_step_end() = 0;  // records it, inside an operation
 protected:
  ~StepEndWork() = default;
};

enum class BackendKind { Cpu, Vulkan };

// Scratch memory an op needs during a submission, by purpose.
enum class ScratchId : uint32_t {
  AttentionQuery,
  AttentionPartials,
  AttentionLse,
  AttentionLogits,
  RotatedKeys,  // keys rotated once per call for a cooperative-matrix kernel (prefill attention, window logits)
  AttentionBatchTable,  // batched decode: each cache's slots and splits, each split's cache
  WindowQuery,
  WindowLogits,
  WindowPartials,
  WindowRowStats,
  WindowHitBounds,
  FrequencyCompressed,
  AppendKeys,    // a host append's K, staged on the device
  AppendValues,  // and its V
  AppendBatchTable,  // batched append: each entry's chunk and where it lands
  SpectralAttentionWork,  // spectral_attention's bin products and held slots' share
  FourierHeadTerms,       // fourier_attention (factorized): per query head, its offsets' dot and largest middle logit
  FourierSpectrum,        // fourier_attention (pruned transforms): W's nonzero bins
  FourierLogits,          // the middle's logits
  FourierBins,            // each block's share of the weights' bins
  HippoFourierSpectrum,      // hippo_fourier_project (Transform): the segment's bins 0 .. N - 1
  EvictionCandidates,        // eviction_scores: each slot block's candidates for the victim
  Count
};

class Backend {
 public:
  static std::unique_ptr<Backend> make_cpu();
  static std::unique_ptr<Backend> make_vulkan(std::unique_ptr<vk::Device> device);
  ~Backend();

  BackendKind kind() const { return kind_; }
  bool is_cpu() const { return kind_ == BackendKind::Cpu; }
  std::string device_name() const;
  vk::Device& device() const;      // Vulkan only
  vk::Recorder& recorder() const;  // Vulkan only
  vk::FftPlans& fft_plans() const; // Vulkan only
  // The most bytes one tensor may take: a shader binds each tensor whole, so on Vulkan what one
  // storage-buffer binding covers (maxStorageBufferRange, below 2^32); on the CPU what size_t counts.
  SizeLimit tensor_limit() const;

  // One operation's work (see the top of this file).
  void begin();
  void upload(const void* src, size_t bytes, Tensor& dst, size_t dst_offset);
  // Outside a step `dst` holds the data when submit() returns; inside one, when wait_step
  // returns true. Refused in a step recorded into an application's command buffer.
  void download(const Tensor& src, size_t src_offset, void* dst, size_t bytes);
  void copy(const Tensor& src, size_t src_offset, Tensor& dst, size_t dst_offset, size_t bytes);
  // `count` copies of `bytes`, copy i from src_offset + i * src_stride to dst_offset +
  // i * dst_stride (the same rows of every head, say): one command on Vulkan, recorded once
  // where a copy per head would be a command each. No destination may overlap a source.
  void copy_strided(const Tensor& src, size_t src_offset, size_t src_stride, Tensor& dst, size_t dst_offset,
                    size_t dst_stride, size_t bytes, uint32_t count);
  void submit();
  // An operation failed with `status` after begin(): its partial work is dropped and, outside
  // a step, its participants restored. Inside a step, a failure that recorded work or came
  // from the device's resources (memory, Vulkan: anything but a check of the arguments or
  // state, which records and changes nothing) breaks the step: it can no longer be submitted.
  void abandon(kvc_status status);
  // `participant` joins the open operation, or the open step, saving its state on joining.
  // On the CPU, where work runs at once, there is nothing to join.
  void enlist(Participant& participant);
  // A participant that goes away (a destroyed cache) leaves the step it joined.
  void withdraw(Participant& participant);
  // `work` is recorded when the open step ends (before its closing barrier), once however
  // often it is left; a step that breaks drops it, and its participants' states go back to
  // before they left it. Inside a step only.
  void leave_for_step_end(StepEndWork& work);
  // Work that goes away (a destroyed cache) is not recorded.
  void cancel_step_end(StepEndWork& work);
  // A Vulkan call returned VK_ERROR_DEVICE_LOST: nothing on the device can be trusted or run
  // any more. The API refuses every call on the context from then on.
  void mark_device_lost() { device_lost_ = true; }
  bool device_lost() const { return device_lost_; }

  // Steps: many operations, one submission. `external` is an application's VkCommandBuffer in
  // the recording state (passed as void*: no Vulkan types here), or null for libkvc's own.
  void begin_step(void* external);
  // Submits libkvc's command buffer without waiting, or closes the application's; throws
  // KVC_ERROR_BAD_STATE (submitting nothing, every participant restored) when the step broke,
  // and the submission's error (every participant restored) when it failed.
  void end_step();
  // True once the last ended step finished on the device (its read-backs delivered).
  bool wait_step(uint64_t timeout_ns);
  bool in_step() const { return step_open_; }
  bool in_external_step() const;
  // GPU time of the last submission libkvc waited for, in microseconds (0 if unknown).
  double last_submission_gpu_us() const;

  // A scratch tensor of at least `bytes`, valid for the current submission.
  Tensor& scratch(ScratchId id, size_t bytes);
  // What the backend keeps between operations for their work: scratch, shared tables, FFT plans.
  uint64_t work_bytes_held() const;
  // Frees the scratch and the FFT plans no cache keeps (kvc_context_trim); outside a step.
  void trim_work_memory();

  // A read-only f32 table that every cache on this backend shares (a transform matrix, ...):
  // `build` runs and the result is uploaded the first time `key` is asked for; it is kept for
  // the backend's life. Call outside a submission.
  Tensor& shared_table(const std::string& key, const std::function<std::vector<float>()>& build);
  // The table built for `key`, or null: for use inside a submission, where building one would
  // discard what was recorded.
  Tensor* find_shared_table(const std::string& key);

 private:
  Backend(BackendKind kind, std::unique_ptr<vk::Device> device);

  friend class Tensor;
  // A buffer whose tensor is gone: given back to the reclaimer now, or once the work recorded
  // with it finished.
  void release(std::unique_ptr<vk::Buffer> buffer);
  // Waits for recorded work, then gives back what release() kept (reclaim_released).
  void collect_released();
  // Hands what release() kept to the device's reclaimer (kept for reuse, or freed on its
  // thread); no recorded work may use it any more.
  void reclaim_released();
  // The transaction's end: saved states dropped (its work was submitted) or put back.
  void commit();
  void roll_back();
  // Records what was left for the step's end; throws (the step then submits nothing) on failure.
  void record_step_end_work();

  BackendKind kind_;
  std::unique_ptr<vk::Device> device_;
  std::unique_ptr<vk::Recorder> recorder_;
  std::unique_ptr<vk::FftPlans> fft_plans_;
  std::vector<std::unique_ptr<Tensor>> scratch_;
  std::map<std::string, std::unique_ptr<Tensor>> shared_tables_;
  std::vector<std::unique_ptr<vk::Buffer>> released_;  // still used by recorded work
  bool step_open_ = false;
  bool operation_open_ = false;    // between begin() and submit()
  uint64_t operation_start_ = 0;   // commands the step held when the operation began
  bool step_broken_ = false;       // an operation failed after recording part of its work
  bool external_pending_ = false;  // an application's command buffer may still run our work
  bool device_lost_ = false;
  std::vector<Participant*> participants_;  // joined the open operation or step
  std::vector<StepEndWork*> step_end_work_;  // left for the open step's end, in the order left
};

// Bytes that live on one backend: host memory on the CPU, a device-local buffer on Vulkan.
class Tensor {
 public:
  Tensor(Backend& backend, size_t bytes);
  // `bytes` of an application's buffer from `offset` on (Vulkan only), used in place.
  Tensor(Backend& backend, std::unique_ptr<vk::Buffer> borrowed, size_t offset, size_t bytes);
  // `bytes` of `whole` from `offset` on (a multiple of kPartAlignment), which lives while any of
  // its parts does: make_parts (Vulkan only).
  Tensor(std::shared_ptr<Tensor> whole, size_t offset, size_t bytes);
  ~Tensor();
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  size_t bytes() const { return bytes_; }
  Backend& backend() const { return backend_; }
  void* host() { return host_.data(); }  // CPU only
  const void* host() const { return host_.data(); }
  // `bytes` from `offset` on, as Vulkan commands and bindings take them (Vulkan only).
  vk::BufferSlice slice(size_t offset, size_t bytes) const;

 private:
  Backend& backend_;
  size_t bytes_;
  size_t buffer_offset_ = 0;  // where the tensor starts in buffer_ or whole_
  std::vector<unsigned char> host_;
  std::unique_ptr<vk::Buffer> buffer_;
  std::shared_ptr<Tensor> whole_;  // a part's allocation
};

// Where make_parts places each part: the largest minStorageBufferOffsetAlignment Vulkan allows,
// so a part binds wherever its tensor would.
constexpr size_t kPartAlignment = 256;

// Tensors of `sizes` bytes, on Vulkan parts of one allocation where the device allows one that
// large (else, and on the CPU, where AddressSanitizer should see each part's end, each its own):
// NVIDIA's driver took 0.55-0.68 ms a call to allocate or free device memory (an H100, 64 MiB
// buffers), so a cache's layers are one allocation each rather than three. Each part reports
// its own bytes; the padding between them (under kPartAlignment) is not counted.
std::vector<std::shared_ptr<Tensor>> make_parts(Backend& backend, const std::vector<size_t>& sizes);

// A place inside a tensor, as ops take their operands.
struct View {
  Tensor* tensor = nullptr;
  size_t offset = 0;

  explicit operator bool() const { return tensor != nullptr; }
  template <typename T>
  T* host() const { return reinterpret_cast<T*>(static_cast<unsigned char*>(tensor->host()) + offset); }
};

inline View view(Tensor& tensor, size_t offset = 0) { return View{&tensor, offset}; }

// `tensor` (a unique or shared owner), replaced by a new one when it holds fewer than `bytes`
// (contents are not kept; the old buffer lives on while recorded work or a saved state uses it).
template <typename Owner>
inline Tensor& ensure(Owner& tensor, Backend& backend, size_t bytes) {
  if (!tensor || tensor->bytes() < bytes) tensor = std::make_unique<Tensor>(backend, bytes);
  return *tensor;
}

}  // namespace kvc
