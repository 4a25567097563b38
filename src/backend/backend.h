// Where ops run: the CPU (the reference, and a real fallback) or one Vulkan device.
// Work is grouped in submissions: begin(), uploads, ops, downloads, submit(). On the CPU
// everything runs at once and submit() is a no-op; on Vulkan it is recorded and run at submit().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"

namespace kvc {

namespace vk {
class Buffer;
class DctPlans;
class Device;
class Recorder;
}  // namespace vk

class Tensor;

enum class BackendKind { Cpu, Vulkan };

// Scratch memory an op needs during a submission, by purpose.
enum class ScratchId : uint32_t {
  AttentionQuery,
  AttentionPartials,
  AttentionLse,
  AttentionLogits,
  WindowQuery,
  WindowLogits,
  WindowPartials,
  WindowRowStats,
  WindowHitBounds,
  FrequencyCompressed,
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
  vk::DctPlans& dct_plans() const; // Vulkan only
  // The largest buffer range one shader binding may cover.
  uint64_t max_buffer_bytes() const;

  void begin();
  void upload(const void* src, size_t bytes, Tensor& dst, size_t dst_offset);
  void download(const Tensor& src, size_t src_offset, void* dst, size_t bytes);
  void copy(const Tensor& src, size_t src_offset, Tensor& dst, size_t dst_offset, size_t bytes);
  void submit();

  // A scratch tensor of at least `bytes`, valid for the current submission.
  Tensor& scratch(ScratchId id, size_t bytes);

  // A read-only f32 table that every cache on this backend shares (a transform matrix, ...):
  // `build` runs and the result is uploaded the first time `key` is asked for; it is kept for
  // the backend's life. Call outside a submission.
  Tensor& shared_table(const std::string& key, const std::function<std::vector<float>()>& build);
  // The table built for `key`, or null: for use inside a submission, where building one would
  // discard what was recorded.
  Tensor* find_shared_table(const std::string& key);

 private:
  Backend(BackendKind kind, std::unique_ptr<vk::Device> device);

  BackendKind kind_;
  std::unique_ptr<vk::Device> device_;
  std::unique_ptr<vk::Recorder> recorder_;
  std::unique_ptr<vk::DctPlans> dct_plans_;
  std::vector<std::unique_ptr<Tensor>> scratch_;
  std::vector<std::unique_ptr<Tensor>> retired_scratch_;  // outgrown during a recording
  std::map<std::string, std::unique_ptr<Tensor>> shared_tables_;
};

// Bytes that live on one backend: host memory on the CPU, a device-local buffer on Vulkan.
class Tensor {
 public:
  Tensor(Backend& backend, size_t bytes);
  ~Tensor();
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  size_t bytes() const { return bytes_; }
  Backend& backend() const { return backend_; }
  void* host() { return host_.data(); }  // CPU only
  const void* host() const { return host_.data(); }
  const vk::Buffer& buffer() const;      // Vulkan only

 private:
  Backend& backend_;
  size_t bytes_;
  std::vector<unsigned char> host_;
  std::unique_ptr<vk::Buffer> buffer_;
};

// A place inside a tensor, as ops take their operands.
struct View {
  Tensor* tensor = nullptr;
  size_t offset = 0;

  explicit operator bool() const { return tensor != nullptr; }
  template <typename T>
  T* host() const { return reinterpret_cast<T*>(static_cast<unsigned char*>(tensor->host()) + offset); }
};

inline View view(Tensor& tensor, size_t offset = 0) { return View{&tensor, offset}; }

}  // namespace kvc
