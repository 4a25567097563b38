// The Vulkan sequence transform against the CPU reference, for the DCT-II, DCT-III and FreqKV
// matrices, odd and prime lengths, several head_dims, f32 and f16, strided heads and offset
// views, outputs poisoned first.
#include <doctest/doctest.h>

#include <functional>

#include "ops/dct_matrix.h"
#include "ops/sequence_transform.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("sequence_transform on Vulkan equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  struct Kind {
    const char* name;
    std::function<uint32_t(uint32_t)> out_length;
    std::function<std::vector<float>(uint32_t)> matrix;
  };
  const Kind kinds[] = {
      {"DCT-II", [](uint32_t n) { return n; }, [](uint32_t n) { return ops::dct2_matrix(n); }},
      {"DCT-III", [](uint32_t n) { return n; }, [](uint32_t n) { return ops::dct3_matrix(n); }},
      {"FreqKV", [](uint32_t n) { return std::max(1u, n / 2); }, [](uint32_t n) { return ops::freqkv_compression_matrix(n, std::max(1u, n / 2)); }},
  };
  const uint32_t head_dims[] = {8, 72, 128, 256};
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (const Kind& kind : kinds)
      for (uint32_t length : {2u, 7u, 64u, 127u, 1000u}) {
        // Long transforms at the smallest head_dim keep lavapipe's run time low.
        const uint32_t head_dim = length >= 1000 ? 8 : head_dims[test::rng()() % 4];
        const uint32_t heads = 1 + test::rng()() % 3, out_length = kind.out_length(length);
        const uint32_t in_stride = length + 5, out_stride = out_length + 2;  // gaps between heads
        const size_t first_in_row = 3, first_out_row = 2;                     // offset views
        const std::vector<float> matrix = kind.matrix(length);
        std::vector<float> input = test::random_floats((first_in_row + size_t(heads) * in_stride) * head_dim);
        const std::vector<unsigned char> input_bytes = test::encode(input, dtype);
        const size_t out_bytes = (first_out_row + size_t(heads) * out_stride) * head_dim * dtype_size(dtype);
        const ops::SequenceTransformShape shape{heads, head_dim, length, out_length, in_stride, out_stride, dtype};
        std::vector<std::vector<float>> results;
        for (Backend* backend : {&test::cpu_backend(), gpu}) {
          auto in = test::make_tensor(*backend, input_bytes.data(), input_bytes.size());
          auto weights = test::make_tensor(*backend, matrix.data(), matrix.size() * 4);
          auto out = test::make_poisoned(*backend, out_bytes);
          backend->begin();
          ops::sequence_transform(*backend, shape,
                                  {View{in.get(), first_in_row * head_dim * dtype_size(dtype)}, view(*weights),
                                   View{out.get(), first_out_row * head_dim * dtype_size(dtype)}});
          backend->submit();
          // Only the rows written: the gaps stay poisoned on both backends.
          std::vector<float> all = test::decode(test::read_tensor(*backend, *out, out_bytes), dtype), written;
          for (uint32_t h = 0; h < heads; ++h) {
            const auto first = all.begin() + (first_out_row + size_t(h) * out_stride) * head_dim;
            written.insert(written.end(), first, first + size_t(out_length) * head_dim);
          }
          results.push_back(written);
        }
        INFO(kind.name, " length ", length, " head_dim ", head_dim, " heads ", heads, " ", std::string(dtype_name(dtype)));
        // f32: both sum in at least f32 over <= 1000 terms of unit scale: ~1e-6 relative.
        // f16: the two results round to f16 independently: at most one ulp apart, 2^-10 of
        // values below 1 in magnitude, relative to a max of order 1.
        CHECK(test::relative_max_error(results[1], results[0]) < (dtype == Dtype::F32 ? 1e-5 : 2e-3));
      }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
