// The Vulkan frequency compression against the CPU reference on every route: FFT lengths with
// every radix the kernel has (2, 3, 4, 8, 16, 5, 7, 11, 13, 17, 19, 23, 29, 31; FreqKV's 4092 -> 2046
// and 4096 -> 2048 among them), lengths with a prime factor above 31 on the chirp-z route (the
// forward transform's, the inverse's with a convolution longer than N, both) and one too long
// for it that the dense route takes,
// several head_dims, f32 and f16, strided heads and offset views (row-aligned and not), with
// and without recent rows moving up behind the compressed ones (in several chunks where they
// outnumber N - L); the moved rows and the rows the op must not touch (before the view, the
// gaps between heads) are compared bit for bit.
#include <doctest/doctest.h>

#include <cstring>

#include "ops/frequency_compress.h"
#include "support/test_support.h"
#include "vulkan/device.h"

namespace kvc {

TEST_CASE("frequency_compress on Vulkan equals the CPU reference on the FFT, chirp-z and dense routes") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  using Route = ops::FrequencyCompressRoute;
  struct Case {
    uint32_t in_length, out_length;
    Route route;
    uint32_t head_dim = 0;  // 0: drawn from head_dims (8 for the long transforms)
    uint32_t recent = 0;    // R
  };
  const Case cases[] = {
      {2, 1, Route::Fft},          {3, 1, Route::Fft, 0, 1},     {8, 4, Route::Fft, 0, 9},  // 3 chunks of 4
      {96, 48, Route::Fft},        {1000, 500, Route::Fft},      {1001, 500, Route::Fft},  // 7 * 11 * 13
      {667, 646, Route::Fft, 0, 50},  // 23 * 29 -> 2 * 17 * 19, 3 chunks of 21
      {4092, 2046, Route::Fft, 0, 8}, {4096, 2048, Route::Fft},  {4096, 3072, Route::Fft},
      // Wide rows at long lengths: several batches of pairs held in registers per workgroup.
      {2048, 1024, Route::Fft, 128, 5}, {3000, 1500, Route::Fft, 64},
      {127, 63, Route::Chirp},     {1021, 510, Route::Chirp, 0, 3}, {2044, 1022, Route::Chirp},  // 4 * 7 * 73
      {96, 47, Route::Chirp, 0, 60}, {100, 97, Route::Chirp},  // 97: a 196-point convolution
      {3079, 1539, Route::Dense},  // prime: a convolution of 6174 points (48.2 KiB) past 48 KiB
  };
  const uint32_t head_dims[] = {8, 72, 128, 256};
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (const Case& c : cases) {
      // Long transforms at the smallest head_dim keep lavapipe's run time low.
      const uint32_t head_dim = c.head_dim ? c.head_dim : c.in_length >= 1000 ? 8 : head_dims[test::rng()() % 4];
      const uint32_t heads = 1 + test::rng()() % 3, stride = c.in_length + c.recent + 5, first_row = 3;
      const size_t element_bytes = dtype_size(dtype), row_bytes = head_dim * element_bytes;
      // Every other case starts 2 elements past a row: a view off 16-byte alignment, where the
      // kernel loads fewer pairs per thread at once.
      const size_t shift = (&c - cases) % 2 ? 2 : 0;
      const size_t first_bytes = first_row * row_bytes + shift * element_bytes;
      const size_t bytes = first_bytes + size_t(heads) * stride * row_bytes;
      std::vector<float> input = test::random_floats(bytes / element_bytes);
      const std::vector<unsigned char> input_bytes = test::encode(input, dtype);
      const ops::FrequencyCompressShape shape{heads, head_dim, c.in_length, c.out_length, stride, dtype, c.recent};
      INFO(std::string(dtype_name(dtype)), " N ", c.in_length, " L ", c.out_length, " R ", c.recent, " head_dim ", head_dim,
           " heads ", heads);
      // A device with more than 48 KiB of shared memory takes the 6174-point convolution too.
      const bool roomier = gpu->device().properties().limits.maxComputeSharedMemorySize >= 6174 * 8;
      CHECK(ops::frequency_compress_route(*gpu, shape) == (c.in_length == 3079 && roomier ? Route::Chirp : c.route));
      std::vector<std::vector<unsigned char>> results;
      for (Backend* backend : {&test::cpu_backend(), gpu}) {
        ops::frequency_compress_prepare(*backend, shape);
        auto states = test::make_tensor(*backend, input_bytes.data(), bytes);
        backend->begin();
        ops::frequency_compress(*backend, shape, {View{states.get(), first_bytes}});
        backend->submit();
        results.push_back(test::read_tensor(*backend, *states, bytes));
      }
      CHECK(std::memcmp(results[1].data(), input_bytes.data(), first_bytes) == 0);
      std::vector<std::vector<float>> compressed(2);
      for (uint32_t head = 0; head < heads; ++head) {
        const size_t head_first = first_bytes + size_t(head) * stride * row_bytes;
        const size_t gap = head_first + size_t(c.in_length + c.recent) * row_bytes, recent_bytes = c.recent * row_bytes;
        CHECK(std::memcmp(results[1].data() + gap, input_bytes.data() + gap, (stride - c.in_length - c.recent) * row_bytes) == 0);
        for (size_t b = 0; b < 2; ++b)
          CHECK(std::memcmp(results[b].data() + head_first + c.out_length * row_bytes,
                            input_bytes.data() + head_first + c.in_length * row_bytes, recent_bytes) == 0);
        for (size_t b = 0; b < 2; ++b) {
          const auto first = results[b].begin() + head_first;
          const std::vector<float> rows = test::decode(std::vector<unsigned char>(first, first + c.out_length * row_bytes), dtype);
          compressed[b].insert(compressed[b].end(), rows.begin(), rows.end());
        }
      }
      // f32: the FFT route rounds in f32 through about log2 N butterfly stages and table
      // twiddles (~1e-7 each), the chirp-z route through twice as many on twice the length,
      // the dense route sums N f32 products (sqrt(N) * 6e-8 of the scale); the CPU sums in
      // double. All stay below 1e-5 of the scale. f16: each side
      // rounds its f32 result to f16 independently: one ulp (2^-11) of values below 1 at most.
      CHECK(test::relative_max_error(compressed[1], compressed[0]) < (dtype == Dtype::F32 ? 1e-5 : 2e-3));
    }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
