// kvc-bench: times libkvc's operations on the default Vulkan device with GPU timestamps
// (warm-up, repetitions, median) and reports each as bytes moved, GB/s and the share of the
// copy bandwidth it measures itself in the same run; the engine rows time whole model steps
// through the C API on the wall clock, beside their GPU time. Never part of the tests.
//
//   kvc-bench [--quick] [--only NAME]... [--reps N] [--json out.json] [--compare peer.json]
// The header and the JSON name the context's matrix path; KVC_COOPERATIVE_MATRIX=0 in the
// environment times the SIMT kernels on a device that has cooperative matrices.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_rows.h"
#include "vulkan/device.h"

namespace kvc::bench {

std::unique_ptr<Tensor> make_random(Backend& backend, size_t bytes, Dtype dtype) {
  // Every element drawn (a repeated block would be data no cache holds), by splitmix64: the
  // standard library's engine and distribution took seconds per tensor of a 128K-token cache.
  // Element i's draw depends on i alone, so the host's threads each take a share: on one thread
  // a row's inputs took seconds while the GPU idled, its clocks falling (docs/benchmarks.md).
  const size_t count = bytes / dtype_size(dtype);
  std::vector<unsigned char> host(bytes);
  const auto draw = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      uint64_t z = 1234 + (i + 1) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      store_element(host.data(), dtype, i, float(z >> 40) * (2.0f / float(1u << 24)) - 1.0f);  // uniform in [-1, 1)
    }
  };
  constexpr size_t kElementsPerThread = size_t(1) << 20;  // fewer are not worth a thread
  const size_t threads = std::clamp<size_t>(std::min<size_t>(std::thread::hardware_concurrency(), count / kElementsPerThread), 1, 32);
  const size_t share = (count + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) workers.emplace_back(draw, t * share, std::min(count, (t + 1) * share));
  draw(0, std::min(count, share));
  for (std::thread& worker : workers) worker.join();
  auto tensor = std::make_unique<Tensor>(backend, bytes);
  backend.begin();
  backend.upload(host.data(), bytes, *tensor, 0);
  backend.submit();
  return tensor;
}

namespace {

std::string driver_info(const vk::Device& device) {
  if (device.properties().apiVersion < VK_API_VERSION_1_2) return "driver " + std::to_string(device.properties().driverVersion);
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  properties.pNext = &driver;
  vkGetPhysicalDeviceProperties2(device.physical_device(), &properties);
  return std::string(driver.driverName) + " " + driver.driverInfo;
}

std::string today() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof(text), "%Y-%m-%d", std::gmtime(&now));
  return text;
}

int run(int argc, char** argv) {
  RowOptions options;
  Timing timing;
  std::string json_path, compare_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") options.quick = true;
    else if (arg == "--only" && i + 1 < argc) options.only.push_back(argv[++i]);
    else if (arg == "--reps" && i + 1 < argc) timing.repetitions = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--compare" && i + 1 < argc) compare_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: kvc-bench [--quick] [--only NAME]... [--reps N] [--json out.json] [--compare peer.json]\n");
      return 2;
    }
  }
  std::unique_ptr<Backend> backend = Backend::make_vulkan(vk::Device::create({}));
  require(backend->device().supports_timestamps(), KVC_ERROR_UNSUPPORTED, "the device's queue has no timestamps");
  Report report;
  report.device = backend->device_name();
  report.driver = driver_info(backend->device());
  const vk::Device& device = backend->device();
  report.matrix_path = std::string(device.matrix_path() == vk::MatrixPath::Cooperative ? "cooperative" : "simt") + " (" +
                       device.matrix_path_detail() + ")";
  report.date = today();
  const bool small_device = backend->device().properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU || options.quick;
  report.copy_gbps = copy_bandwidth_gbps(*backend, timing, small_device ? (size_t(64) << 20) : (size_t(1) << 30));
  add_attention_rows(*backend, timing, options, report);
  add_decode_batch_rows(*backend, timing, options, report);
  add_policy_rows(*backend, timing, options, report);
  add_fourier_rows(*backend, timing, options, report);
  add_engine_rows(timing, options, report);
  Report peer;
  if (!compare_path.empty()) peer = read_json(compare_path);
  print_table(report, compare_path.empty() ? nullptr : &peer);
  if (!json_path.empty()) std::ofstream(json_path) << to_json(report);
  return 0;
}

}  // namespace
}  // namespace kvc::bench

int main(int argc, char** argv) {
  try {
    return kvc::bench::run(argc, argv);
  } catch (const kvc::Error& error) {
    std::fprintf(stderr, "kvc-bench: %s: %s\n", kvc_status_name(error.status()), error.what());
    return 1;
  }
}
