#include "backend/backend.h"

#include <algorithm>
#include <cstring>

#include "vulkan/buffer.h"
#include "vulkan/device.h"
#include "vulkan/fft.h"
#include "vulkan/reclaimer.h"
#include "vulkan/recorder.h"

namespace kvc {

Backend::Backend(BackendKind kind, std::unique_ptr<vk::Device> device) : kind_(kind), device_(std::move(device)) {
  if (device_) {
    recorder_ = std::make_unique<vk::Recorder>(*device_);
    fft_plans_ = std::make_unique<vk::FftPlans>(*device_);
  }
  scratch_.resize(static_cast<size_t>(ScratchId::Count));
}

Backend::~Backend() {
  try {
    if (recorder_) recorder_->wait(UINT64_MAX);
  } catch (const Error&) {
    // A lost device: nothing is running any more, and a destructor must not throw.
  }
  shared_tables_.clear();
  scratch_.clear();
  released_.clear();
  fft_plans_.reset();
  recorder_.reset();
  device_.reset();
}

std::unique_ptr<Backend> Backend::make_cpu() {
  return std::unique_ptr<Backend>(new Backend(BackendKind::Cpu, nullptr));
}

std::unique_ptr<Backend> Backend::make_vulkan(std::unique_ptr<vk::Device> device) {
  return std::unique_ptr<Backend>(new Backend(BackendKind::Vulkan, std::move(device)));
}

std::string Backend::device_name() const { return device_ ? device_->name() : std::string("CPU"); }

vk::Device& Backend::device() const {
  require(device_ != nullptr, KVC_ERROR_INTERNAL, "Vulkan device asked of the CPU backend");
  return *device_;
}

vk::Recorder& Backend::recorder() const {
  require(recorder_ != nullptr, KVC_ERROR_INTERNAL, "Vulkan recorder asked of the CPU backend");
  return *recorder_;
}

vk::FftPlans& Backend::fft_plans() const {
  require(fft_plans_ != nullptr, KVC_ERROR_INTERNAL, "VkFFT plans asked of the CPU backend");
  return *fft_plans_;
}

SizeLimit Backend::tensor_limit() const {
  return device_ ? SizeLimit{device_->properties().limits.maxStorageBufferRange, "the device's maxStorageBufferRange"} : kHostSizeLimit;
}

void Backend::begin() {
  require(!operation_open_, KVC_ERROR_INTERNAL, "Backend::begin inside an operation");
  operation_open_ = true;
  if (recorder_ && step_open_) {
    operation_start_ = recorder_->commands_recorded();
    // In an application's command buffer its own commands may come between our calls.
    if (recorder_->external()) recorder_->order_after_all();
  }
  if (step_open_ || !recorder_) return;
  collect_released();
  recorder_->begin();
  operation_start_ = 0;
}

void Backend::upload(const void* src, size_t bytes, Tensor& dst, size_t dst_offset) {
  require(dst_offset + bytes <= dst.bytes(), KVC_ERROR_INTERNAL, "upload past the end of a tensor");
  if (is_cpu()) std::memcpy(static_cast<unsigned char*>(dst.host()) + dst_offset, src, bytes);
  else recorder_->upload(src, bytes, dst.slice(dst_offset, bytes));
}

void Backend::download(const Tensor& src, size_t src_offset, void* dst, size_t bytes) {
  require(src_offset + bytes <= src.bytes(), KVC_ERROR_INTERNAL, "download past the end of a tensor");
  if (is_cpu()) std::memcpy(dst, static_cast<const unsigned char*>(src.host()) + src_offset, bytes);
  else recorder_->download(src.slice(src_offset, bytes), dst, bytes);
}

void Backend::copy(const Tensor& src, size_t src_offset, Tensor& dst, size_t dst_offset, size_t bytes) {
  copy_strided(src, src_offset, 0, dst, dst_offset, 0, bytes, 1);
}

void Backend::copy_strided(const Tensor& src, size_t src_offset, size_t src_stride, Tensor& dst, size_t dst_offset,
                           size_t dst_stride, size_t bytes, uint32_t count) {
  if (count == 0) return;
  const size_t src_span = (count - 1) * src_stride + bytes, dst_span = (count - 1) * dst_stride + bytes;
  require(src_offset + src_span <= src.bytes() && dst_offset + dst_span <= dst.bytes(), KVC_ERROR_INTERNAL,
          "copy past the end of a tensor");
  if (!is_cpu()) {
    recorder_->copy_strided(src.slice(src_offset, src_span), src_stride, dst.slice(dst_offset, dst_span), dst_stride, bytes, count);
    return;
  }
  for (uint32_t i = 0; i < count; ++i)
    std::memmove(static_cast<unsigned char*>(dst.host()) + dst_offset + i * dst_stride,
                 static_cast<const unsigned char*>(src.host()) + src_offset + i * src_stride, bytes);
}

void Backend::submit() {
  require(operation_open_, KVC_ERROR_INTERNAL, "Backend::submit without begin");
  if (!step_open_ && recorder_) {
    recorder_->submit();  // on failure the operation stays open: abandon() restores its participants
    commit();
    collect_released();
  }
  operation_open_ = false;
}

void Backend::abandon(kvc_status status) {
  if (!operation_open_) return;
  operation_open_ = false;
  if (!recorder_) return;
  if (!step_open_) {
    recorder_->discard();
    roll_back();
    return;
  }
  const bool checks_failed = status != KVC_ERROR_OUT_OF_MEMORY && status != KVC_ERROR_VULKAN && status != KVC_ERROR_DEVICE_LOST &&
                             status != KVC_ERROR_INTERNAL;
  if (recorder_->commands_recorded() > operation_start_ || !checks_failed) step_broken_ = true;  // else the step is intact
}

void Backend::enlist(Participant& participant) {
  if (!recorder_ || std::find(participants_.begin(), participants_.end(), &participant) != participants_.end()) return;
  participant.save();
  participants_.push_back(&participant);
}

void Backend::withdraw(Participant& participant) {
  participants_.erase(std::remove(participants_.begin(), participants_.end(), &participant), participants_.end());
}

void Backend::leave_for_step_end(StepEndWork& work) {
  require(step_open_, KVC_ERROR_INTERNAL, "work left for the end of a step outside one");
  if (std::find(step_end_work_.begin(), step_end_work_.end(), &work) == step_end_work_.end()) step_end_work_.push_back(&work);
}

void Backend::cancel_step_end(StepEndWork& work) {
  step_end_work_.erase(std::remove(step_end_work_.begin(), step_end_work_.end(), &work), step_end_work_.end());
}

void Backend::record_step_end_work() {
  const std::vector<StepEndWork*> work = std::move(step_end_work_);
  step_end_work_.clear();
  for (StepEndWork* item : work) {
    begin();
    try {
      item->record_step_end();
    } catch (...) {
      operation_open_ = false;
      throw;
    }
    submit();
  }
}

void Backend::commit() {
  for (Participant* participant : participants_) participant->forget_saved();
  participants_.clear();
}

void Backend::roll_back() {
  for (Participant* participant : participants_) participant->restore();
  participants_.clear();
}

void Backend::begin_step(void* external) {
  require(!step_open_, KVC_ERROR_BAD_STATE, "a step is already open on this context: end it with kvc_step_end first");
  if (recorder_) {
    collect_released();
    recorder_->begin(static_cast<VkCommandBuffer>(external));
  }
  step_open_ = true;
  step_broken_ = false;
  step_end_work_.clear();
}

void Backend::end_step() {
  require(step_open_, KVC_ERROR_BAD_STATE, "no step is open on this context: begin one with kvc_step_begin");
  if (recorder_ && !step_broken_) {
    try {
      record_step_end_work();
    } catch (...) {
      step_open_ = false;
      recorder_->discard();
      roll_back();
      throw;
    }
  }
  step_end_work_.clear();
  step_open_ = false;
  if (!recorder_) return;
  if (step_broken_) {
    recorder_->discard();
    roll_back();
    throw Error(KVC_ERROR_BAD_STATE,
                "a call in this step failed part way (see its error): nothing was submitted, and every cache the step used is "
                "back as it was at kvc_step_begin");
  }
  external_pending_ = recorder_->external();
  try {
    recorder_->end();
  } catch (const Error&) {
    external_pending_ = false;
    roll_back();
    throw;
  }
  commit();
}

bool Backend::wait_step(uint64_t timeout_ns) {
  if (!recorder_) return true;
  if (!recorder_->wait(timeout_ns)) return false;
  if (!external_pending_) reclaim_released();
  return true;
}

bool Backend::in_external_step() const { return step_open_ && recorder_ && recorder_->external(); }

double Backend::last_submission_gpu_us() const { return recorder_ ? recorder_->last_submission_ns() * 1e-3 : 0.0; }

void Backend::release(std::unique_ptr<vk::Buffer> buffer) {
  if (!recorder_) return;
  released_.push_back(std::move(buffer));
  if (!recorder_->recording() && !recorder_->in_flight() && !external_pending_) reclaim_released();
}

void Backend::reclaim_released() {
  device_->reclaimer().give_back(std::move(released_));
  released_.clear();
}

void Backend::collect_released() {
  // Our own work is waited for; an application's command buffer has completed by contract
  // (kvc_step_begin_commands) once another operation or step begins.
  recorder_->wait(UINT64_MAX);
  external_pending_ = false;
  reclaim_released();
  fft_plans_->trim();
}

Tensor& Backend::scratch(ScratchId id, size_t bytes) {
  std::unique_ptr<Tensor>& slot = scratch_[static_cast<size_t>(id)];
  // An outgrown tensor's buffer outlives it while recorded commands use it (release()). It grows
  // by half again to spare regrowth, but never past what one binding may cover: ops bind the
  // whole scratch tensor, and a request within tensor_limit() must stay bindable.
  if (!slot || slot->bytes() < bytes) {
    const uint64_t grown = std::min<uint64_t>(uint64_t(bytes) + bytes / 2, tensor_limit().bytes);
    slot = std::make_unique<Tensor>(*this, size_t(std::max<uint64_t>(grown, bytes)));
  }
  return *slot;
}

uint64_t Backend::work_bytes_held() const {
  uint64_t bytes = 0;
  for (const std::unique_ptr<Tensor>& tensor : scratch_) bytes += tensor ? tensor->bytes() : 0;
  for (const auto& table : shared_tables_) bytes += table.second->bytes();
  if (device_) bytes += device_->reclaimer().kept_bytes();
  return bytes + (fft_plans_ ? fft_plans_->bytes_held() : 0);
}

void Backend::trim_work_memory() {
  require(!step_open_ && !operation_open_, KVC_ERROR_INTERNAL, "work memory trimmed inside an operation");
  for (std::unique_ptr<Tensor>& tensor : scratch_) tensor.reset();
  if (!recorder_) return;
  // A step ended without a wait may still use the scratch (release() kept it) and the plans:
  // its work is waited for first (an application's command buffer has completed by contract).
  collect_released();
  fft_plans_->trim(0);
  device_->reclaimer().free_all();  // kept for reuse or not, the memory is back when kvc_context_trim returns
}

Tensor& Backend::shared_table(const std::string& key, const std::function<std::vector<float>()>& build) {
  auto it = shared_tables_.find(key);
  if (it == shared_tables_.end()) {
    const std::vector<float> values = build();
    auto table = std::make_unique<Tensor>(*this, values.size() * sizeof(float));
    begin();
    upload(values.data(), values.size() * sizeof(float), *table, 0);
    submit();
    it = shared_tables_.emplace(key, std::move(table)).first;
  }
  return *it->second;
}

Tensor* Backend::find_shared_table(const std::string& key) {
  const auto it = shared_tables_.find(key);
  return it == shared_tables_.end() ? nullptr : it->second.get();
}

Tensor::Tensor(Backend& backend, size_t bytes) : backend_(backend), bytes_(bytes) {
  if (backend.is_cpu()) host_.resize(bytes);
  else {
    buffer_ = backend.device().reclaimer().take(bytes);
    if (!buffer_) buffer_ = std::make_unique<vk::Buffer>(backend.device(), bytes, vk::MemoryKind::DeviceLocal);
  }
}

Tensor::Tensor(Backend& backend, std::unique_ptr<vk::Buffer> borrowed, size_t offset, size_t bytes)
    : backend_(backend), bytes_(bytes), buffer_offset_(offset), buffer_(std::move(borrowed)) {}

Tensor::Tensor(std::shared_ptr<Tensor> whole, size_t offset, size_t bytes)
    : backend_(whole->backend()), bytes_(bytes), buffer_offset_(offset), whole_(std::move(whole)) {}

Tensor::~Tensor() {
  if (buffer_) backend_.release(std::move(buffer_));
}

vk::BufferSlice Tensor::slice(size_t offset, size_t bytes) const {
  if (whole_) {
    // The whole's buffer spans its other parts too: a slice past this part's end would bind them.
    require(offset + bytes <= bytes_, KVC_ERROR_INTERNAL, "slice past the end of a tensor part");
    return whole_->slice(buffer_offset_ + offset, bytes);
  }
  require(buffer_ != nullptr, KVC_ERROR_INTERNAL, "Vulkan buffer asked of a CPU tensor");
  return {buffer_.get(), buffer_offset_ + offset, bytes};
}

std::vector<std::shared_ptr<Tensor>> make_parts(Backend& backend, const std::vector<size_t>& sizes) {
  std::vector<size_t> offsets;
  size_t total = 0;
  for (size_t bytes : sizes) {
    offsets.push_back(total);
    total += (bytes + kPartAlignment - 1) / kPartAlignment * kPartAlignment;
  }
  std::vector<std::shared_ptr<Tensor>> parts;
  if (backend.is_cpu() || total > backend.device().max_allocation_bytes()) {
    for (size_t bytes : sizes) parts.push_back(std::make_shared<Tensor>(backend, bytes));
    return parts;
  }
  const auto whole = std::make_shared<Tensor>(backend, total);
  for (size_t i = 0; i < sizes.size(); ++i) parts.push_back(std::make_shared<Tensor>(whole, offsets[i], sizes[i]));
  return parts;
}

}  // namespace kvc
