#include "backend/backend.h"

#include <cstring>

#include "vulkan/buffer.h"
#include "vulkan/device.h"
#include "vulkan/fft.h"
#include "vulkan/recorder.h"

namespace kvc {

Backend::Backend(BackendKind kind, std::unique_ptr<vk::Device> device) : kind_(kind), device_(std::move(device)) {
  if (device_) {
    recorder_ = std::make_unique<vk::Recorder>(*device_);
    dct_plans_ = std::make_unique<vk::DctPlans>(*device_);
  }
  scratch_.resize(static_cast<size_t>(ScratchId::Count));
}

Backend::~Backend() {
  shared_tables_.clear();
  scratch_.clear();
  retired_scratch_.clear();
  dct_plans_.reset();
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

vk::DctPlans& Backend::dct_plans() const {
  require(dct_plans_ != nullptr, KVC_ERROR_INTERNAL, "VkFFT plans asked of the CPU backend");
  return *dct_plans_;
}

uint64_t Backend::max_buffer_bytes() const {
  return device_ ? device_->properties().limits.maxStorageBufferRange : UINT64_MAX;
}

void Backend::begin() {
  retired_scratch_.clear();
  if (recorder_) recorder_->begin();
}

void Backend::upload(const void* src, size_t bytes, Tensor& dst, size_t dst_offset) {
  require(dst_offset + bytes <= dst.bytes(), KVC_ERROR_INTERNAL, "upload past the end of a tensor");
  if (is_cpu()) std::memcpy(static_cast<unsigned char*>(dst.host()) + dst_offset, src, bytes);
  else recorder_->upload(src, bytes, {&dst.buffer(), dst_offset, bytes});
}

void Backend::download(const Tensor& src, size_t src_offset, void* dst, size_t bytes) {
  require(src_offset + bytes <= src.bytes(), KVC_ERROR_INTERNAL, "download past the end of a tensor");
  if (is_cpu()) std::memcpy(dst, static_cast<const unsigned char*>(src.host()) + src_offset, bytes);
  else recorder_->download({&src.buffer(), src_offset, bytes}, dst, bytes);
}

void Backend::copy(const Tensor& src, size_t src_offset, Tensor& dst, size_t dst_offset, size_t bytes) {
  require(src_offset + bytes <= src.bytes() && dst_offset + bytes <= dst.bytes(), KVC_ERROR_INTERNAL,
          "copy past the end of a tensor");
  if (is_cpu())
    std::memmove(static_cast<unsigned char*>(dst.host()) + dst_offset,
                 static_cast<const unsigned char*>(src.host()) + src_offset, bytes);
  else recorder_->copy({&src.buffer(), src_offset, bytes}, {&dst.buffer(), dst_offset, bytes}, bytes);
}

void Backend::submit() {
  if (recorder_) recorder_->submit();
}

Tensor& Backend::scratch(ScratchId id, size_t bytes) {
  std::unique_ptr<Tensor>& slot = scratch_[static_cast<size_t>(id)];
  if (!slot || slot->bytes() < bytes) {
    if (slot) retired_scratch_.push_back(std::move(slot));  // recorded commands may still use it
    slot = std::make_unique<Tensor>(*this, bytes + bytes / 2);
  }
  return *slot;
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
  else buffer_ = std::make_unique<vk::Buffer>(backend.device(), bytes, vk::MemoryKind::DeviceLocal);
}

Tensor::~Tensor() = default;

const vk::Buffer& Tensor::buffer() const {
  require(buffer_ != nullptr, KVC_ERROR_INTERNAL, "Vulkan buffer asked of a CPU tensor");
  return *buffer_;
}

}  // namespace kvc
