#include "support/test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "vulkan/device.h"

namespace kvc::test {

uint64_t seed() {
  static const uint64_t value = [] {
    const char* fixed = std::getenv("KVC_TEST_SEED");
    const uint64_t chosen = fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
    std::printf("[kvc tests] random seed %llu (set KVC_TEST_SEED to repeat)\n", static_cast<unsigned long long>(chosen));
    return chosen;
  }();
  return value;
}

std::mt19937_64& rng() {
  static std::mt19937_64 generator(seed());
  return generator;
}

std::vector<float> random_floats(size_t count, float low, float high) {
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(rng());
  return values;
}

std::vector<unsigned char> encode(std::vector<float>& values, Dtype dtype) {
  std::vector<unsigned char> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    store_element(bytes.data(), dtype, i, values[i]);
    values[i] = load_element(bytes.data(), dtype, i);
  }
  return bytes;
}

std::vector<float> decode(const std::vector<unsigned char>& bytes, Dtype dtype) {
  std::vector<float> values(bytes.size() / dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) values[i] = load_element(bytes.data(), dtype, i);
  return values;
}

Backend& cpu_backend() {
  static std::unique_ptr<Backend> backend = Backend::make_cpu();
  return *backend;
}

ValidationMode validation_mode() {
  const char* setting = std::getenv("KVC_VALIDATION");
  if (!setting) return ValidationMode::when_installed;
  return std::strcmp(setting, "0") == 0 ? ValidationMode::off : ValidationMode::required;
}

namespace {

std::unique_ptr<Backend>& shared_vulkan_backend() {
  static std::unique_ptr<Backend> backend = []() -> std::unique_ptr<Backend> {
    vk::DeviceOptions options;
    options.validation = validation_mode() != ValidationMode::off;
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        return Backend::make_vulkan(vk::Device::create(options));
      } catch (const Error& error) {
        if (error.status() != KVC_ERROR_UNSUPPORTED || validation_mode() == ValidationMode::required) {
          std::printf("[kvc tests] no Vulkan backend: %s\n", error.what());
          return nullptr;
        }
        std::printf("[kvc tests] %s: running without validation\n", error.what());
        options.validation = false;
      }
    }
    return nullptr;
  }();
  return backend;
}

std::unique_ptr<Backend>& second_simt_backend() {
  static std::unique_ptr<Backend> backend;
  return backend;
}

}  // namespace

Backend* vulkan_backend() { return shared_vulkan_backend().get(); }

Backend* vulkan_simt_backend() {
  Backend* shared = vulkan_backend();
  if (!shared || shared->device().matrix_path() == vk::MatrixPath::Simt) return shared;
  std::unique_ptr<Backend>& simt = second_simt_backend();
  if (!simt) {
    vk::DeviceOptions options;
    options.validation = shared->device().validating();
    options.cooperative_matrix = false;
    simt = Backend::make_vulkan(vk::Device::create(options));
  }
  return simt.get();
}

void destroy_vulkan_backend() {
  second_simt_backend().reset();
  shared_vulkan_backend().reset();
}

uint32_t validation_messages() {
  uint32_t messages = vulkan_backend() ? vulkan_backend()->device().validation_messages() : 0;
  if (second_simt_backend()) messages += second_simt_backend()->device().validation_messages();
  return messages;
}

std::unique_ptr<Tensor> make_tensor(Backend& backend, const void* data, size_t bytes) {
  auto tensor = std::make_unique<Tensor>(backend, bytes);
  backend.begin();
  backend.upload(data, bytes, *tensor, 0);
  backend.submit();
  return tensor;
}

std::unique_ptr<Tensor> make_poisoned(Backend& backend, size_t bytes) {
  std::vector<uint32_t> words((bytes + 3) / 4, kPoisonWord);
  std::vector<unsigned char> poison(bytes);
  std::memcpy(poison.data(), words.data(), bytes);
  return make_tensor(backend, poison.data(), bytes);
}

double scores_tolerance(bool cooperative, bool rope) {
  if (!cooperative) return 1e-5;
  return rope ? 4e-3 : 1e-4;
}

std::vector<unsigned char> read_tensor(Backend& backend, const Tensor& tensor, size_t bytes) {
  std::vector<unsigned char> data(bytes);
  backend.begin();
  backend.download(tensor, 0, data.data(), bytes);
  backend.submit();
  return data;
}

double relative_max_error(const std::vector<float>& actual, const std::vector<float>& reference) {
  if (actual.size() != reference.size()) return INFINITY;
  double max_error = 0.0, scale = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!std::isfinite(actual[i])) return INFINITY;
    max_error = std::max(max_error, std::fabs(double(actual[i]) - reference[i]));
    scale = std::max(scale, std::fabs(double(reference[i])));
  }
  return scale > 0 ? max_error / scale : max_error;
}

EnvironmentSetting::EnvironmentSetting(const char* name, const char* value) : name_(name) {
  if (const char* current = std::getenv(name)) before_ = current;
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

EnvironmentSetting::~EnvironmentSetting() {
  if (before_) setenv(name_.c_str(), before_->c_str(), 1);
  else unsetenv(name_.c_str());
}

}  // namespace kvc::test
