// Vulkan FourierAttention decode against the CPU reference (materialize, then attend) on fresh
// random layers: odd and non-power-of-two sizes, GQA, f16 and f32, middles that end mid-word and
// mid-vector, of one token, or none at all, a Llama-like head, and the edges of each kernel.
#include <doctest/doctest.h>

#include "support/fourier_case.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("fourier_attention on Vulkan matches materialize-then-attend on the CPU") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // q heads, kv heads, head_dim, full slots, (slot stride), middle, (middle stride), N, T, K and V compressed, dtype
  const ops::FourierAttentionShape shapes[] = {
      {6, 2, 24, 7, 0, 37, 0, 13, 257, 17, 20, Dtype::F32},
      {3, 3, 40, 1, 0, 1, 0, 7, 101, 39, 1, Dtype::F16},  // one middle token; 39 packed V dims (3 slices)
      {3, 3, 40, 1, 0, 1, 0, 7, 101, 39, 1, Dtype::F32},
      {9, 3, 16, 21, 0, 0, 0, 4, 64, 8, 8, Dtype::F16},   // no middle
      {8, 2, 128, 35, 0, 291, 0, 64, 5003, 102, 115, Dtype::F16},  // T prime: VkFFT's Bluestein route
      {4, 1, 256, 9, 0, 50, 0, 24, 300, 200, 230, Dtype::F32},
      {2, 1, 256, 5, 0, 1029, 0, 8, 1100, 1, 1, Dtype::F16},  // 255 packed dims of K and V: one slice; three blocks
      // Pairs of query heads in one transform across kv heads (groups of 3), an odd count (the
      // last pair half empty), 2N = T, and groups past 8 (two head blocks).
      {5, 5, 16, 2, 0, 60, 0, 32, 64, 9, 3, Dtype::F16},
      {12, 1, 16, 3, 0, 77, 0, 6, 80, 5, 11, Dtype::F32},
      {16, 16, 128, 100, 0, 4001, 0, 16, 4099, 8, 6, Dtype::F32},
      // More middle blocks than splits (128 kv heads: 4 splits of 19 blocks of 256 tokens): the
      // online softmax across a split's blocks, the last one partial.
      {128, 128, 16, 3, 0, 4700, 0, 4, 4800, 8, 6, Dtype::F16},
      // A workgroup of 160 (head_dim 136: a subgroup of lavapipe's or NVIDIA's partly idle in
      // the middle's reductions, 17 lanes a key in attention_decode).
      {4, 2, 136, 9, 0, 300, 0, 16, 600, 100, 40, Dtype::F16},
      // A long window (T = 9009 = 3^2 7 11 13) in f16, as caches are held: in f32 the factorized
      // route's rounding, which grows with T, reached 1.006e-5 of the output scale here
      // (lavapipe), at the f32 bound below (docs/benchmarks.md).
      {8, 2, 64, 20, 0, 9000, 0, 64, 9009, 50, 40, Dtype::F16},
  };
  // The pruned transforms (T a multiple of B, the least power of two >= 2N): one residue (T =
  // B), residues that are not a power of two, more residues than a workgroup's runs with the
  // last block partial (how many residues a block takes depends on the device's shared memory),
  // 2N well below B, a long f32 window (B = 1024), the shortest runs, and a middle as long as
  // the window.
  const ops::FourierAttentionShape pruned_shapes[] = {
      {6, 2, 24, 7, 0, 801, 0, 13, 832, 17, 20, Dtype::F32},       // B 32, R 26
      {4, 2, 32, 5, 0, 4000, 0, 100, 4864, 20, 25, Dtype::F32},    // B 256, R 19: the last block partial
      {8, 2, 128, 35, 0, 3000, 0, 64, 4096, 102, 115, Dtype::F16},  // B 128, R 32
      {3, 1, 64, 20, 0, 16000, 0, 512, 16384, 50, 40, Dtype::F32},  // B 1024, R 16
      {5, 1, 16, 3, 0, 5, 0, 1, 6, 4, 3, Dtype::F32},               // N 1: B 2 (a radix-2 stage alone), R 3
      {4, 2, 16, 3, 0, 11, 0, 2, 12, 7, 5, Dtype::F16},             // B 4 (a radix-4 stage alone), R 3
      {4, 2, 16, 3, 0, 12, 0, 2, 12, 7, 5, Dtype::F16},             // the middle fills the window
  };
  const auto check = [&](const ops::FourierAttentionShape& base, bool pruned) {
    const test::FourierCase c = test::FourierCase::random(base);
    const ops::FourierAttentionShape& shape = c.shape;
    INFO("seed ", test::seed(), " q_heads ", shape.num_q_heads, " kv_heads ", shape.num_kv_heads, " head_dim ", shape.head_dim,
         " full ", shape.num_full_slots, " middle ", shape.num_middle, " N ", shape.num_states, " T ", shape.window_length, " ",
         std::string(dtype_name(shape.dtype)));
    const std::vector<float> expected = c.run(test::cpu_backend());
    for (const bool length_route : {false, true}) {
      if (length_route && !pruned) continue;
      const test::EnvironmentSetting route("KVC_FOURIER_TRANSFORM", length_route ? "length" : nullptr);
      CHECK(ops::fourier_attention_pruned_vulkan(*gpu, shape) == (pruned && !length_route));
      const std::vector<float> actual = c.run(*gpu);
      // f32: the kernels rebuild each middle logit from an f32 transform (of length T through
      // VkFFT, of length B pruned) and accumulate in f32 where the reference uses double: 1e-5
      // of the output scale, as for ops::attention. f16: both round the output to f16 (2^-11
      // relative each).
      CHECK(test::relative_max_error(actual, expected) < (shape.dtype == Dtype::F32 ? 1e-5 : 2e-3));
    }
  };
  for (const ops::FourierAttentionShape& shape : shapes) {
    // T a multiple of the least power of two >= 2N: 64 of 64 (N 32), 80 of 16, 4800 of 8.
    const bool pruned = shape.num_middle > 0 &&
                        ((shape.num_states == 32 && shape.window_length == 64) || (shape.num_states == 6 && shape.window_length == 80) ||
                         (shape.num_states == 4 && shape.window_length == 4800));
    check(shape, pruned);
  }
  for (const ops::FourierAttentionShape& shape : pruned_shapes) check(shape, true);
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
