// segment_spectrum on Vulkan (packed real sequences through VkFFT, of length T or as chirp-z
// transforms over plans of f * 2^a points, f = 1, 3, 5 or 7, at every bin or over a span of them) against
// the CPU's formula in double, over awkward lengths: odd, prime, a prime factor VkFFT handles by
// Bluestein, and around powers of two.
#include <doctest/doctest.h>

#include <algorithm>

#include "ops/segment_spectrum.h"
#include "support/test_support.h"
#include "vulkan/device.h"
#include "vulkan/fft.h"
#include "vulkan/validation_log.h"

namespace kvc {

namespace {

// Random bins of the shape's transform, 0 and T - 1 (the mirror of 1) always among them.
std::vector<uint32_t> random_bins(const ops::SegmentSpectrumShape& shape) {
  std::vector<uint32_t> bins(shape.num_bins);
  for (uint32_t b = 0; b < shape.num_bins; ++b) bins[b] = uint32_t(test::rng()() % shape.transform_length);
  bins[0] = 0;
  bins[shape.num_bins - 1] = shape.transform_length - 1;
  return bins;
}

// The Vulkan route's spectrum and the CPU's formula in double, over random rows, at `bins`.
std::vector<std::vector<float>> both_spectra(Backend& gpu, const ops::SegmentSpectrumShape& shape, const std::vector<uint32_t>& bins) {
  std::vector<float> rows = test::random_floats(size_t(shape.num_heads) * shape.slot_stride * shape.head_dim);
  const std::vector<unsigned char> row_bytes = test::encode(rows, shape.dtype);
  const size_t out_bytes = size_t(shape.num_heads) * shape.num_bins * shape.head_dim * 8;
  std::vector<std::vector<float>> results;
  for (Backend* backend : {&test::cpu_backend(), &gpu}) {
    auto states = test::make_tensor(*backend, row_bytes.data(), row_bytes.size());
    auto bin_table = test::make_tensor(*backend, bins.data(), bins.size() * 4);
    auto out = test::make_poisoned(*backend, out_bytes);
    backend->begin();
    ops::segment_spectrum(*backend, shape, {view(*states), view(*bin_table), view(*out)});
    backend->submit();
    results.push_back(test::decode(test::read_tensor(*backend, *out, out_bytes), Dtype::F32));
  }
  return results;
}

std::vector<std::vector<float>> both_spectra(Backend& gpu, const ops::SegmentSpectrumShape& shape) {
  return both_spectra(gpu, shape, random_bins(shape));
}

}  // namespace

TEST_CASE("segment_spectrum on Vulkan equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // {heads, head_dim, slot_stride, first_slot, length, T, offset, bins, dtype}
  const ops::SegmentSpectrumShape shapes[] = {{2, 8, 40, 3, 37, 37, 0, 37, Dtype::F32},     // prime T, every bin
                                              {3, 16, 300, 10, 148, 148, 0, 21, Dtype::F16},  // 148 = 4 * 37
                                              {1, 64, 200, 0, 120, 512, 7, 64, Dtype::F32},   // zero-padded window
                                              {8, 128, 1100, 10, 1021, 1021, 0, 130, Dtype::F16, 1.0f / 1021},  // FAEDKV's mean
                                              {1, 256, 90, 2, 77, 100, 11, 9, Dtype::F32}};  // the widest head
  // Each through a plan of length T, and as a chirp-z transform over a plan of f * 2^a points.
  for (const bool chirp_z : {false, true})
    for (ops::SegmentSpectrumShape shape : shapes) {
      shape.chirp_z = chirp_z;
      const std::vector<std::vector<float>> results = both_spectra(*gpu, shape);
      INFO("heads ", shape.num_heads, " head_dim ", shape.head_dim, " length ", shape.length, " T ", shape.transform_length,
           " ", std::string(dtype_name(shape.dtype)), chirp_z ? " chirp-z" : "");
      // An f32 FFT's error grows like log T times the unit roundoff, relative to the spectrum's scale.
      CHECK(test::relative_max_error(results[1], results[0]) < 2e-5);
    }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("segment_spectrum's chirp-z route equals the CPU reference at FAEDKV's segment lengths") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // The smallest segments (1 through a plan of 2 points; 2 by the plan's transform alone), primes whose
  // padded length is 2.3 or 2.5 times theirs (97 -> 224, 4099 -> 10240), an odd composite, a power
  // of two and its neighbours (4095 -> 8192, just over twice).
  for (const uint32_t length : {1u, 2u, 3u, 97u, 1009u, 1155u, 4095u, 4096u, 4097u, 4099u}) {
    const uint32_t bins = std::min(length, 24u);
    ops::SegmentSpectrumShape shape{2, 16, length + 7, 3, length, length, 0, bins, Dtype::F32, 1.0f / float(length)};
    shape.chirp_z = true;
    const std::vector<std::vector<float>> results = both_spectra(*gpu, shape);
    INFO("M ", length, " padded to ", vk::chirp_padded_length(length, length));
    // As above: the chirp-z transform is three f32 FFTs of P <= 4 M points, log P roundoffs each.
    CHECK(test::relative_max_error(results[1], results[0]) < 2e-5);
  }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("segment_spectrum's chirp-z route over a span of bins equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  vk::FftPlans& plans = gpu->fft_plans();
  // Runs of bins (at most M / 2 + 1 of them, as FAEDKV stores them), the span their mirrors
  // widen: the lowest (the span wraps around 0, FAEDKV's default chunks), one around M / 4 (two
  // runs; the span holds the middle between them), the bins nearest M / 2 (the span excludes
  // 0), bin 5 alone (a span of 11) and bin 0 alone (a span of one: at M = 48 = 3 * 16 the plan's
  // transform alone, and at the power of two 64 every span is).
  struct Run {
    uint32_t first, count;
  };
  for (const uint32_t length : {37u, 48u, 64u, 97u, 1009u, 1155u, 4097u, 4099u}) {
    for (const Run run : {Run{0, std::min(length / 2 + 1, 3 + length / 11)}, Run{length / 4, std::min(length / 4 + 1, 3 + length / 11)},
                          Run{length / 2 - 3, 4}, Run{5, 1}, Run{0, 1}}) {
      ops::SegmentSpectrumShape shape{2, 16, length + 7, 3, length, length, 0, run.count, Dtype::F32, 1.0f / float(length)};
      shape.chirp_z = true;
      std::vector<uint32_t> bins(run.count);
      for (uint32_t b = 0; b < run.count; ++b) bins[b] = run.first + b;
      shape.span = ops::mirrored_bin_span(bins, length);
      const uint32_t padded = vk::chirp_padded_length(length, shape.span.count), all_bins = vk::chirp_padded_length(length, length);
      INFO("M ", length, " bins ", run.first, " .. ", run.first + run.count - 1, " span ", shape.span.first, " + ", shape.span.count,
           " padded to ", padded);
      gpu->begin();
      gpu->submit();
      plans.trim(0);  // no plan is left: the op's own shows which padded length it took
      const std::vector<std::vector<float>> results = both_spectra(*gpu, shape, bins);
      CHECK(test::relative_max_error(results[1], results[0]) < 2e-5);
      CHECK(plans.holds_plan({padded, shape.head_dim / 2}));
      if (padded != all_bins) CHECK_FALSE(plans.holds_plan({all_bins, shape.head_dim / 2}));
    }
    // The low bins' span takes a shorter plan than all bins would, where M is not a power of two.
    if (length != 64)
      CHECK(vk::chirp_padded_length(length, ops::mirrored_bin_span({0, 1, 2}, length).count) < vk::chirp_padded_length(length, length));
  }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("chirp-z transforms of two lengths with one padded length share their plans") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  vk::FftPlans& plans = gpu->fft_plans();
  const auto transform = [&](uint32_t length) {
    ops::SegmentSpectrumShape shape{1, 8, length, 0, length, length, 0, 1, Dtype::F32};
    shape.chirp_z = true;
    return both_spectra(*gpu, shape);
  };
  transform(1009);  // padded to 2048
  gpu->begin();
  gpu->submit();  // a safe point: what nobody keeps goes, but plans of chirp-z lengths stay
  const uint64_t made = plans.plans_made();
  CHECK(plans.chirp_filters_held() == 0);
  const std::vector<std::vector<float>> results = transform(1000);  // padded to 2048 too
  CHECK(plans.plans_made() == made);
  CHECK(test::relative_max_error(results[1], results[0]) < 2e-5);
  transform(1025);  // padded to 2560: a plan of its own
  CHECK(plans.plans_made() == made + 1);
}

TEST_CASE("chirp_padded_length is M for powers of two, else the least of 2^a, 3 * 2^a, 5 * 2^a and 7 * 2^a that holds the span") {
  // The forms by their definition: an odd part of 1, 3, 5 or 7, searched upward from the least
  // length the convolution needs.
  const auto plan_form = [](uint64_t n) {
    while (n % 2 == 0) n /= 2;
    return n == 1 || n == 3 || n == 5 || n == 7;
  };
  for (uint32_t length = 1; length <= 3000; ++length)
    for (const uint32_t span : {1u, 2u, (length + 1) / 2, length}) {
      if (span > length) continue;
      uint64_t expected = length > 1 && (length & (length - 1)) == 0 ? length : std::max<uint64_t>(2, uint64_t(length) + span - 1);
      while (!plan_form(expected)) ++expected;
      INFO("M ", length, " span ", span);
      CHECK(vk::chirp_padded_length(length, span) == expected);
    }
  // FAEDKV's default chunks at a 32K prompt: 32707 points whose bins and mirrors span 5945.
  CHECK(vk::chirp_padded_length(32707, 5945) == 40960);
}

TEST_CASE("VkFFT plans are made once per shape and dropped when nobody keeps them") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  gpu->begin();
  gpu->submit();  // a safe point: plans nobody keeps (earlier tests') go
  const size_t before = gpu->fft_plans().plans_held();
  std::shared_ptr<vk::FftPlan> kept = gpu->fft_plans().keep({74, 3});
  gpu->fft_plans().get({74, 3});
  gpu->fft_plans().get({75, 3});
  CHECK(gpu->fft_plans().plans_held() == before + 2);
  gpu->begin();
  gpu->submit();
  CHECK(gpu->fft_plans().plans_held() == before + 1);  // the kept one stays
  kept.reset();
  gpu->begin();
  gpu->submit();
  CHECK(gpu->fft_plans().plans_held() == before);
  // A power-of-two plan nobody keeps stays, the newest within the budget (chirp-z transforms
  // share them): asked for again, it is not made again.
  gpu->fft_plans().get({64, 3});
  gpu->begin();
  gpu->submit();
  const uint64_t made = gpu->fft_plans().plans_made();
  gpu->fft_plans().get({64, 3});
  CHECK(gpu->fft_plans().plans_made() == made);
}

TEST_CASE("a VkFFT plan of a long prime length leaves no Vulkan object behind") {
  // 65537 is prime: Bluestein's algorithm, whose padded length (past 2^17) no device's shared
  // memory holds, so it takes several uploads; VkFFT 1.2.26 did not delete their inverse axes
  // (vulkan/fft.cpp). The validation layer names what outlives its device at vkDestroyDevice.
  if (test::validation_mode() == test::ValidationMode::off) return;
  vk::DeviceOptions options;
  options.validation = true;
  std::unique_ptr<vk::Device> device;
  try {
    device = vk::Device::create(options);
  } catch (const Error& error) {
    REQUIRE(test::validation_mode() == test::ValidationMode::when_installed);
    MESSAGE("not checked: ", error.what());
    return;
  }
  { vk::FftPlan plan(*device, {65537, 1}); }
  const uint64_t before = vk::validation_messages_in_process();
  device.reset();
  CHECK(vk::validation_messages_in_process() == before);
}

}  // namespace kvc
