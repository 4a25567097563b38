// Vulkan attention against the CPU reference on fresh random inputs over a grid of shapes:
// decode (flash-decoding split + merge) and causal chunks, with and without RoPE, f32 and
// f16, GQA ratios 1, 4 and 8, head_dim 8 to 256, cache lengths from 1 to 70000. Chunks run on
// both kernels where the device has cooperative matrices (the SIMT kernel on a second device
// made without them); on lavapipe the SIMT kernel alone.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/attention_case.h"
#include "support/test_support.h"
#include "vulkan/device.h"
#include "vulkan/trig_precision.h"

namespace kvc {
namespace {

// f32: both accumulate in f32 or better; 1e-5 of the output scale covers the GPU's f32
// summation over up to 70000 slots. f16: both round the output to f16 (2^-11 relative each).
// Cooperative matrices multiply f16 operands: without RoPE the queries and keys are the f16
// inputs exactly and only P is rounded (2^-12 relative, unbiased), within the same 2e-3; with
// RoPE the rotated queries and keys are rounded to f16 too, which moves a logit by about 2^-12
// of its terms' magnitudes: ~1e-3 on the peaked case (q in [-8, 8], logits up to ~12), hence 4e-3.
double tolerance(const ops::AttentionShape& shape, bool cooperative) {
  if (shape.dtype == Dtype::F32) return 1e-5;
  return cooperative && shape.rope.enabled() ? 4e-3 : 2e-3;
}

// The shared backend, and for a chunk also the SIMT one where the shared one takes
// cooperative matrices.
std::vector<Backend*> backends_for(const ops::AttentionShape& shape) {
  Backend* gpu = test::vulkan_backend();
  std::vector<Backend*> backends{gpu};
  if (gpu && ops::attention_on_cooperative_matrices(*gpu, shape)) backends.push_back(test::vulkan_simt_backend());
  return backends;
}

// The cooperative-matrix prefill's variants, set in the environment for the guard's lifetime:
// keys pre-rotated (the default) or rotated as staged (KVC_COOPMAT_ROPE=load), and the softmax
// in registers (the default where the fragments are QuadRows) or through shared memory
// (KVC_COOPMAT_SOFTMAX=shared).
struct CoopmatVariant {
  bool rope_on_load = false;
  bool softmax_shared = false;
};

struct CoopmatVariantGuard {
  explicit CoopmatVariantGuard(CoopmatVariant variant)
      : rope("KVC_COOPMAT_ROPE", variant.rope_on_load ? "load" : nullptr),
        softmax("KVC_COOPMAT_SOFTMAX", variant.softmax_shared ? "shared" : nullptr) {}
  const test::EnvironmentSetting rope, softmax;
};

// The variants a chunk of `shape` runs on `gpu`: the default alone on SIMT; on cooperative
// matrices also keys rotated as staged (with RoPE) and the shared-memory softmax (where the
// default keeps it in registers).
std::vector<CoopmatVariant> coopmat_variants(Backend& gpu, const ops::AttentionShape& shape) {
  std::vector<CoopmatVariant> variants{{}};
  if (!ops::attention_on_cooperative_matrices(gpu, shape)) return variants;
  if (shape.rope.enabled()) variants.push_back({true, false});
  if (vk::rows_in_registers(gpu.device())) variants.push_back({false, true});
  return variants;
}

// A decode's key rotation: by the built-in cos and sin (the default where the device measured
// them precise, vulkan/trig_precision.h) and by the exact polynomial route every device takes
// (KVC_ROPE_TRIG=polynomial); nullptr is the default, whatever the environment held.
std::vector<const char*> key_trig_routes(Backend& gpu, const ops::AttentionShape& shape) {
  if (shape.num_queries != 1 || !shape.key_rope().enabled() || !gpu.device().builtin_trig_precise()) return {nullptr};
  return {nullptr, "polynomial"};
}

void check_against_cpu(const ops::AttentionShape& shape, float q_range = 2.0f) {
  const bool with_scores = shape.num_slots <= 5000;  // the CPU scores pass is slow past that
  const test::AttentionCase problem = test::AttentionCase::random(shape, q_range);
  const test::AttentionResult expected = problem.run(test::cpu_backend(), with_scores);
  for (Backend* gpu : backends_for(shape)) {
    REQUIRE(gpu != nullptr);
    const bool cooperative = ops::attention_on_cooperative_matrices(*gpu, shape);
    for (const CoopmatVariant variant : coopmat_variants(*gpu, shape)) {
      for (const char* trig : key_trig_routes(*gpu, shape)) {
        const CoopmatVariantGuard guard(variant);
        const test::EnvironmentSetting trig_route("KVC_ROPE_TRIG", trig);
        const test::AttentionResult actual = problem.run(*gpu, with_scores);
        INFO("q_heads ", shape.num_q_heads, " kv_heads ", shape.num_kv_heads, " head_dim ", shape.head_dim, " queries ",
             shape.num_queries, " slots ", shape.num_slots, " ", std::string(dtype_name(shape.dtype)), " rope ", shape.rope.style, "/",
             shape.rope.rotary_dims,
             std::string(cooperative ? " cooperative" : " SIMT"), std::string(variant.rope_on_load ? ", keys rotated as staged" : ""),
             std::string(variant.softmax_shared ? ", softmax through shared memory" : ""),
             std::string(trig ? ", keys rotated by the polynomial" : ""));
        CHECK(test::relative_max_error(actual.out, expected.out) < tolerance(shape, cooperative));
        if (with_scores) CHECK(test::relative_max_error(actual.scores, expected.scores) < test::scores_tolerance(cooperative, shape.rope.enabled()));
        // A decode's logits and lse carry the same f32 dot products (and RoPE) as its scores.
        if (!expected.logits.empty()) {
          CHECK(test::relative_max_error(actual.logits, expected.logits) < test::scores_tolerance(cooperative, shape.rope.enabled()));
          CHECK(test::relative_max_error(actual.lse, expected.lse) < test::scores_tolerance(cooperative, shape.rope.enabled()));
        }
      }
    }
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace

TEST_CASE("decode attention on Vulkan equals the CPU reference") {
  const uint32_t gqa[][2] = {{4, 4}, {8, 2}, {16, 2}};  // ratios 1, 4, 8
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t head_dim : {64u, 96u, 128u})
      for (const auto& heads : gqa)
        for (uint32_t slots : {1u, 2u, 127u, 129u, 1000u, 4099u}) {
          const kvc_rope_style rope = slots % 2 ? KVC_ROPE_NEOX : KVC_ROPE_INTERLEAVED;
          check_against_cpu(test::attention_shape(heads[0], heads[1], head_dim, 1, slots, dtype, rope));
          if (slots == 129u) check_against_cpu(test::attention_shape(heads[0], heads[1], head_dim, 1, slots, dtype));
        }
}

TEST_CASE("decode attention on Vulkan over 70000 slots, peaked and flat softmax") {
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_against_cpu(test::attention_shape(8, 1, 128, 1, 70000, dtype), 2.0f);
    check_against_cpu(test::attention_shape(8, 1, 128, 1, 70000, dtype, KVC_ROPE_NEOX, 64), 8.0f);
  }
}

TEST_CASE("decode attention on Vulkan with more query heads per kv head than one workgroup takes") {
  check_against_cpu(test::attention_shape(24, 1, 64, 1, 333, Dtype::F32, KVC_ROPE_NEOX));  // MQA, group of 24
}

TEST_CASE("decode attention on Vulkan at the head_dim and group limits") {
  // Groups of 3, 6 and 12 take head blocks of 3, 6 and 6 (the largest divisor up to 8);
  // head_dim 8 is one 16-byte lane per key in f16; head_dim 256 in f32 is 64 lanes per key,
  // more than a 32-wide subgroup: the shared-memory lane sum; 40 leaves lanes idle (10 in f16).
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_against_cpu(test::attention_shape(9, 3, 64, 1, 517, dtype, KVC_ROPE_NEOX));
    check_against_cpu(test::attention_shape(12, 2, 128, 1, 300, dtype, KVC_ROPE_INTERLEAVED));
    check_against_cpu(test::attention_shape(12, 1, 64, 1, 77, dtype));
    check_against_cpu(test::attention_shape(4, 2, 8, 1, 1001, dtype, KVC_ROPE_NEOX));
    check_against_cpu(test::attention_shape(4, 1, 256, 1, 2049, dtype, KVC_ROPE_NEOX, 128));
    check_against_cpu(test::attention_shape(8, 2, 40, 1, 130, dtype, KVC_ROPE_INTERLEAVED));
    // Interleaved pairs over part of the row, the boundary inside a lane's chunk (dims 32-35 in
    // f32, 32-39 in f16): the chunk holds rotated and unrotated pairs.
    check_against_cpu(test::attention_shape(8, 2, 128, 1, 301, dtype, KVC_ROPE_INTERLEAVED, 34));
    // Whole-row NeoX (a lane holds both halves of its pairs, key_dim) at lane counts that are not
    // powers of two (24: 3 or 6 lanes, 40: 5 or 10) and at 64 lanes a key (256 in f32).
    check_against_cpu(test::attention_shape(8, 2, 24, 1, 211, dtype, KVC_ROPE_NEOX));
    check_against_cpu(test::attention_shape(8, 2, 40, 1, 150, dtype, KVC_ROPE_NEOX));
    check_against_cpu(test::attention_shape(4, 1, 256, 1, 700, dtype, KVC_ROPE_NEOX));
    // head_dim 24 in f16 is 3 lanes a key, 42 keys a pass: a group of 4 sums 168 (head, key)
    // scores through shared memory, more than the workgroup's 128 threads (found by decode_evict's test).
    check_against_cpu(test::attention_shape(12, 3, 24, 1, 54, dtype));
  }
}

TEST_CASE("causal chunk attention on Vulkan equals the CPU reference") {
  // A workgroup takes 64 rows (head_dim 128) to 128 rows (head_dim 64) of one kv head, rows
  // being query x group head: 63, 64 and 129 rows at ratio 1 fall just inside and outside
  // such blocks, and 5 queries leave most of a block empty.
  const uint32_t gqa[][2] = {{4, 4}, {8, 2}, {8, 1}};  // ratios 1, 4, 8
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t head_dim : {64u, 96u, 128u})
      for (const auto& heads : gqa)
        for (uint32_t queries : {2u, 5u, 63u, 129u})
          for (uint32_t cached : {0u, 3u, 1000u}) {
            const kvc_rope_style rope = (queries + cached) % 2 ? KVC_ROPE_NEOX : KVC_ROPE_NONE;
            check_against_cpu(test::attention_shape(heads[0], heads[1], head_dim, queries, cached + queries, dtype, rope));
          }
}

TEST_CASE("causal chunk attention on Vulkan: head dims 8 to 256, interleaved and partial RoPE") {
  // 8: each thread stages its own rows' queries; 40 and 72: an odd number of 8-dim columns
  // (values staged 4 keys at a time); 256: 32-row blocks over 128-key tiles.
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t head_dim : {8u, 40u, 72u, 256u}) {
      check_against_cpu(test::attention_shape(8, 2, head_dim, 37, 37 + 300, dtype, KVC_ROPE_INTERLEAVED));
      check_against_cpu(test::attention_shape(4, 1, head_dim, 70, 70 + 129, dtype, KVC_ROPE_NEOX, head_dim / 2 / 8 * 8 + 8));
    }
  check_against_cpu(test::attention_shape(8, 2, 128, 65, 65 + 500, Dtype::F32, KVC_ROPE_INTERLEAVED, 64));
  check_against_cpu(test::attention_shape(8, 2, 128, 65, 65 + 500, Dtype::F16, KVC_ROPE_NEOX, 32));
}

TEST_CASE("causal chunk attention on Vulkan over a long cache, peaked and flat softmax") {
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_against_cpu(test::attention_shape(8, 2, 128, 100, 100 + 9000, dtype), 2.0f);
    check_against_cpu(test::attention_shape(8, 2, 128, 100, 100 + 9000, dtype, KVC_ROPE_NEOX, 64), 8.0f);
  }
}

TEST_CASE("causal chunk attention takes cooperative matrices wherever the device offers them") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const vk::Device& device = gpu->device();
  const bool cooperative = device.matrix_path() == vk::MatrixPath::Cooperative;
  MESSAGE(device.name(), ": ", device.matrix_path_detail());
  // Lavapipe has 16-bit arithmetic but no cooperative matrices: the fallback (CI checks this).
  if (device.properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) CHECK(!cooperative);
  for (uint32_t head_dim : {16u, 64u, 96u, 128u}) {
    ops::AttentionShape shape = test::attention_shape(8, 2, head_dim, 37, 37 + 300, Dtype::F16, KVC_ROPE_NEOX);
    CHECK(ops::attention_on_cooperative_matrices(*gpu, shape) == cooperative);
    shape.dtype = Dtype::F32;  // f32 caches, decode and the other head dims keep the SIMT kernels
    CHECK(!ops::attention_on_cooperative_matrices(*gpu, shape));
  }
  for (uint32_t head_dim : {8u, 40u, 72u, 256u})
    CHECK(!ops::attention_on_cooperative_matrices(*gpu, test::attention_shape(8, 2, head_dim, 37, 337, Dtype::F16)));
  CHECK(!ops::attention_on_cooperative_matrices(*gpu, test::attention_shape(8, 2, 128, 1, 300, Dtype::F16)));
  if (!cooperative) return;
  Backend* simt = test::vulkan_simt_backend();
  REQUIRE(simt != nullptr);
  CHECK(simt->device().matrix_path() == vk::MatrixPath::Simt);
}

TEST_CASE("causal chunk attention on cooperative matrices: block edges, GQA, causal offsets") {
  // A workgroup takes 128 rows (8 subgroups of 16) of one kv head and tiles of 32 or 64 keys:
  // row counts just inside and past a subgroup's 16 and a block's 128, at GQA ratios 1, 3 and 8
  // (a group's heads straddle subgroups), cached lengths on and off the tiles. Runs through
  // check_against_cpu on both kernels and both softmax routes where the device has them.
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  if (gpu->device().matrix_path() != vk::MatrixPath::Cooperative) {
    MESSAGE("skipped: ", gpu->device().matrix_path_detail());
    return;
  }
  auto check = [&](ops::AttentionShape shape) {
    shape.slot_stride = shape.num_slots + 3;  // as AttentionCase lays the cache out
    CHECK(ops::attention_on_cooperative_matrices(*gpu, shape));
    check_against_cpu(shape);
  };
  const uint32_t gqa[][2] = {{4, 4}, {6, 2}, {8, 1}};
  for (const auto& heads : gqa)
    for (uint32_t queries : {2u, 15u, 17u, 128u, 129u, 300u})
      for (uint32_t cached : {0u, 31u, 32u, 63u, 64u, 1000u}) {
        const kvc_rope_style rope = (queries + cached) % 2 ? KVC_ROPE_NEOX : (cached % 2 ? KVC_ROPE_INTERLEAVED : KVC_ROPE_NONE);
        check(test::attention_shape(heads[0], heads[1], 64, queries, cached + queries, Dtype::F16, rope));
      }
  for (uint32_t head_dim : {16u, 48u, 112u}) check(test::attention_shape(8, 2, head_dim, 70, 70 + 129, Dtype::F16, KVC_ROPE_NEOX, head_dim / 2));
}

TEST_CASE("attention on Vulkan over keys stored rotated: only queries rotate") {
  // The decode kernel skips its key rotation; chunks read them as stored on both kernels (on
  // cooperative matrices with no pre-rotation pass, whatever the kv heads' alignment).
  auto rotated = [](ops::AttentionShape shape) {
    shape.keys_rotated = true;
    return shape;
  };
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t slots : {1u, 130u, 4099u}) {
      check_against_cpu(rotated(test::attention_shape(8, 2, 128, 1, slots, dtype, KVC_ROPE_NEOX)));
      check_against_cpu(rotated(test::attention_shape(12, 2, 64, 1, slots, dtype, KVC_ROPE_INTERLEAVED, 32)));
    }
  for (Dtype dtype : {Dtype::F32, Dtype::F16}) {
    check_against_cpu(rotated(test::attention_shape(8, 2, 64, 37, 37 + 300, dtype, KVC_ROPE_NEOX)));
    check_against_cpu(rotated(test::attention_shape(6, 2, 128, 129, 129 + 1001, dtype, KVC_ROPE_INTERLEAVED, 64)));
  }
}

}  // namespace kvc
