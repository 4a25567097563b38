// Shared test helpers: seeded random data (the seed is printed), backends for CPU and Vulkan,
// tensors filled from host vectors, poisoning, and error metrics with stated meaning.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::test {

// One generator per test run; KVC_TEST_SEED fixes the seed, otherwise it is fresh and printed.
std::mt19937_64& rng();
uint64_t seed();

std::vector<float> random_floats(size_t count, float low = -1.0f, float high = 1.0f);
// Values in dtype's storage, as bytes; `values` is rounded to the dtype in place so that the
// CPU reference sees exactly what the GPU reads.
std::vector<unsigned char> encode(std::vector<float>& values, Dtype dtype);
std::vector<float> decode(const std::vector<unsigned char>& bytes, Dtype dtype);

Backend& cpu_backend();
// Whether the tests' Vulkan contexts run the validation layer, from KVC_VALIDATION: unset, when
// it is installed; "0", never (a quicker run); anything else (CI: 1), always, and a missing
// layer fails the run. Device::create also reads it, so contexts made without the flag
// validate too.
enum class ValidationMode { when_installed, off, required };
ValidationMode validation_mode();

// The Vulkan backend all GPU tests share (validation as validation_mode() says), or nullptr.
Backend* vulkan_backend();
// A Vulkan backend on the same device that runs the SIMT kernels: the shared one where its
// path is SIMT already, else a second one made without cooperative matrices (so that a GPU
// run tests both kernels of each op that has two), or nullptr.
Backend* vulkan_simt_backend();
// Destroys the shared backend (at the end of the run, so that what its destruction reports,
// such as objects never destroyed, is counted); vulkan_backend() is null afterwards.
void destroy_vulkan_backend();
// Validation-layer messages seen so far on the shared Vulkan backends (the whole process's are
// in vulkan/validation_log.h).
uint32_t validation_messages();

// Attention scores against the CPU reference. They are f32 probabilities either way
// (attention_scores in f32 SIMT), the sum over queries and heads of order 1, but they divide by
// the attention kernel's log-sum-exp. On SIMT that agrees to 1e-5. On cooperative matrices
// (f16 chunks) it carries the f16 rounding of rotated queries and keys (with RoPE: about 2^-12
// of a logit's terms, ~1e-3 on test_attention_vulkan's peaked case, hence 4e-3; the same holds
// for an f16 cache that stores keys rotated, which each backend rounds apart) or, without
// RoPE, the tensor cores' f32 accumulation, which truncates where SIMT rounds (Fasi et al.
// 2021): ~1e-5 of a logit, hence 1e-4.
double scores_tolerance(bool cooperative, bool rope);

std::unique_ptr<Tensor> make_tensor(Backend& backend, const void* data, size_t bytes);
// A tensor of `bytes` filled with kPoisonWord, NaN as f32 and as both f16 halves, so unwritten
// outputs fail.
constexpr uint32_t kPoisonWord = 0x7e007e00u;
std::unique_ptr<Tensor> make_poisoned(Backend& backend, size_t bytes);
std::vector<unsigned char> read_tensor(Backend& backend, const Tensor& tensor, size_t bytes);

// max |a - b| / max |b|: the error relative to the reference's scale (0 when both are 0);
// NaN anywhere gives +inf.
double relative_max_error(const std::vector<float>& actual, const std::vector<float>& reference);

// An environment variable libkvc reads per call (KVC_BATCH_DECODE, KVC_COOPMAT_SOFTMAX, ...)
// set to `value`, or unset when `value` is null, for the guard's lifetime; what it was before
// (a value the user exported, or none) after.
class EnvironmentSetting {
 public:
  EnvironmentSetting(const char* name, const char* value);
  ~EnvironmentSetting();
  EnvironmentSetting(const EnvironmentSetting&) = delete;
  EnvironmentSetting& operator=(const EnvironmentSetting&) = delete;

 private:
  std::string name_;
  std::optional<std::string> before_;
};

}  // namespace kvc::test
