// The CPU frequency compression against FreqKV eq. 3 by formula (support/formulas.h, long
// double, no code shared), for prime and composite lengths, several heads with gaps between
// them, in place: rows past L and the gaps keep whatever they held.
#include <doctest/doctest.h>

#include "ops/frequency_compress.h"
#include "support/formulas.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("frequency_compress on the CPU equals FreqKV eq. 3 by formula, in place") {
  constexpr uint32_t kDim = 8, kHeads = 2, kGap = 3;
  for (auto [length, retained] : {std::pair{2u, 1u}, {7u, 3u}, {64u, 32u}, {96u, 48u}, {100u, 25u}, {1021u, 510u}}) {
    const uint32_t stride = length + kGap;
    std::vector<float> input = test::random_floats(size_t(kHeads) * stride * kDim);
    Backend& cpu = test::cpu_backend();
    auto states = test::make_tensor(cpu, input.data(), input.size() * 4);
    ops::frequency_compress_cpu({kHeads, kDim, length, retained, stride, Dtype::F32}, {view(*states)});
    const std::vector<float> result = test::decode(test::read_tensor(cpu, *states, input.size() * 4), Dtype::F32);
    for (uint32_t head = 0; head < kHeads; ++head)
      for (uint32_t d = 0; d < kDim; ++d) {
        std::vector<long double> column(length);
        std::vector<float> got(retained), expected(retained);
        for (uint32_t n = 0; n < length; ++n) column[n] = input[(size_t(head) * stride + n) * kDim + d];
        const std::vector<long double> by_formula = test::freqkv_compression_by_formula(column, retained);
        for (uint32_t m = 0; m < retained; ++m) {
          got[m] = result[(size_t(head) * stride + m) * kDim + d];
          expected[m] = static_cast<float>(by_formula[m]);
        }
        INFO("N ", length, " L ", retained, " head ", head, " dim ", d);
        // Double sums of f32 inputs, rounded to f32 once: a few 1e-7 of the scale; a wrong
        // weight, sign or index shows as O(1).
        CHECK(test::relative_max_error(got, expected) < 1e-6);
        for (uint32_t n = length; n < stride; ++n) {  // the gap after the head
          const size_t at = (size_t(head) * stride + n) * kDim + d;
          CHECK(result[at] == input[at]);
        }
      }
  }
}

}  // namespace kvc
