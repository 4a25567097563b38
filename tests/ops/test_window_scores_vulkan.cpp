// Vulkan window scores against the CPU reference on fresh random inputs: GQA ratios 1, 3
// and 8, head_dim 16 to 128, windows of 1 to 32, prefixes of 7 to 65700, RoPE (NeoX, interleaved,
// partial) or not, f32/f16; group x window of 4 to 256 rows (one or two row tiles of the logits
// kernel), prefixes that end inside a slot tile; hits for K from 1 to the whole prefix, with and
// without ties. f16 shapes run on both logits kernels where the device has cooperative matrices
// (the SIMT kernel on a second device made without them); on lavapipe the SIMT kernel alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "support/window_case.h"
#include "vulkan/device.h"
#include "vulkan/fragment_layout.h"

namespace kvc {
namespace {

ops::WindowScoresShape make_shape(uint32_t q_heads, uint32_t kv_heads, uint32_t head_dim, uint32_t window, uint32_t prefix,
                                  uint32_t hit_k, Dtype dtype, kvc_rope_style rope = KVC_ROPE_NONE, uint32_t rotary_dims = 0) {
  ops::WindowScoresShape shape;
  shape.num_q_heads = q_heads;
  shape.num_kv_heads = kv_heads;
  shape.head_dim = head_dim;
  shape.window = window;
  shape.num_slots = prefix + window;
  shape.slot_stride = shape.num_slots + 5;
  shape.dtype = dtype;
  shape.rope = {rope, rope == KVC_ROPE_NONE ? 0u : (rotary_dims ? rotary_dims : head_dim), 10000.0};
  shape.hit_k = hit_k;
  return shape;
}

// The shared backend, and also the SIMT one where the shared one computes this shape's logits
// on cooperative matrices.
std::vector<Backend*> backends_for(const ops::WindowScoresShape& shape) {
  Backend* gpu = test::vulkan_backend();
  std::vector<Backend*> backends{gpu};
  if (gpu && ops::window_logits_on_cooperative_matrices(*gpu, shape)) backends.push_back(test::vulkan_simt_backend());
  return backends;
}

// How far a logit on cooperative matrices may lie from the exact one, relative to its
// sum_d |q_d k_d| (scaled): with RoPE the rotated queries and keys are rounded to f16 (2^-11
// relative each; unrotated f16 inputs stay exact), the tensor cores' f32 accumulation truncates
// (at most head_dim x 2^-23, Fasi et al. 2021), and 2^-20 covers the GPU's f32 RoPE and scaling
// (a few 2^-24 each) and the f16 roundings' product term (2^-22).
double cooperative_logit_error(const ops::WindowScoresShape& shape) {
  return (shape.rope.enabled() ? 2.0 * std::ldexp(1.0, -11) : 0.0) + shape.head_dim * std::ldexp(1.0, -23) + std::ldexp(1.0, -20);
}

// Hits on cooperative matrices: the rank-K boundary of a row may fall elsewhere among logits
// closer than the error above (at a prefix of 5000 and K = 600 neighbouring logits are ~1e-3
// apart, as close as the f16 rounding with RoPE), so a slot's count may differ from the
// reference's by at most the rows where its place is uncertain (WindowCase::uncertain_hits);
// each row still takes exactly hit_k slots, so a kv head's counts sum to group x window x hit_k.
void check_hits_within_error(const test::WindowCase& problem, const test::WindowResult& actual, const test::WindowResult& expected) {
  const ops::WindowScoresShape& shape = problem.shape;
  const uint32_t prefix = shape.num_prefix(), group = shape.num_q_heads / shape.num_kv_heads;
  const std::vector<uint32_t> uncertain = problem.uncertain_hits(cooperative_logit_error(shape));
  REQUIRE(actual.hits.size() == expected.hits.size());
  size_t outside = 0, uncertain_slots = 0;
  for (size_t i = 0; i < expected.hits.size(); ++i) {
    const uint32_t difference = actual.hits[i] > expected.hits[i] ? actual.hits[i] - expected.hits[i] : expected.hits[i] - actual.hits[i];
    outside += difference > uncertain[i];
    uncertain_slots += uncertain[i] > 0;
  }
  INFO(uncertain_slots, " of ", expected.hits.size(), " slots uncertain in some row");
  CHECK(outside == 0);
  for (uint32_t kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head) {
    uint64_t total = 0;
    for (uint32_t slot = 0; slot < prefix; ++slot) total += actual.hits[size_t(kv_head) * prefix + slot];
    CHECK(total == uint64_t(group) * shape.window * shape.hit_k);
  }
}

void check_against_cpu(const ops::WindowScoresShape& shape) {
  // Queries in [-3, 3] give logits of several units. On SIMT hits must match exactly, so inputs
  // are drawn until no row's rank-K boundary lies within 1e-5 of a tie (ten times the f32
  // rounding of a logit, ~1e-6): with thousands of slots a row's K-th and (K+1)-th logits fall
  // that close now and then (about 1 row in 100 at K = 600 of 5000), and f32 and double may
  // then keep different slots. The last query head's queries are zero: its rows tie exactly on
  // every backend and kernel (the earliest slots win).
  test::WindowCase problem;
  for (int draw = 0;; ++draw) {
    REQUIRE(draw < 20);
    problem = test::WindowCase::random(shape, 3.0f);
    for (uint32_t j = 0; j < shape.window; ++j)
      std::fill_n(problem.q.begin() + (size_t(j) * shape.num_q_heads + shape.num_q_heads - 1) * shape.head_dim, shape.head_dim, 0.0f);
    if (problem.smallest_rank_gap() > 1e-5) break;
  }
  const test::WindowResult expected = problem.run(test::cpu_backend());
  for (Backend* gpu : backends_for(shape)) {
    REQUIRE(gpu != nullptr);
    const bool cooperative = ops::window_logits_on_cooperative_matrices(*gpu, shape);
    // Where the rows' work runs in registers, the shared-memory route too.
    const bool both_routes = cooperative && vk::rows_in_registers(gpu->device());
    for (bool shared_route : {false, true}) {
      if (shared_route && !both_routes) continue;
      const test::EnvironmentSetting route("KVC_COOPMAT_SOFTMAX", shared_route ? "shared" : nullptr);
      const test::WindowResult actual = problem.run(*gpu);
      INFO("q_heads ", shape.num_q_heads, " kv_heads ", shape.num_kv_heads, " head_dim ", shape.head_dim, " window ", shape.window,
           " prefix ", shape.num_prefix(), " hit_k ", shape.hit_k, " ", std::string(dtype_name(shape.dtype)), " rope ",
           shape.rope.style, "/", shape.rope.rotary_dims, std::string(cooperative ? " cooperative" : " SIMT"),
           std::string(shared_route ? ", rows through shared memory" : ""));
      // The sums per kv head are attention scores of the window's queries (probabilities summed
      // over queries and heads), so they take attention's score tolerance for the path: on SIMT
      // f32 logits and exp against double, about 1e-6 of the largest; on cooperative matrices
      // the logits' f16 rounding (test::scores_tolerance says why).
      CHECK(test::relative_max_error(actual.cumulative, expected.cumulative) < test::scores_tolerance(cooperative, shape.rope.enabled()));
      if (!cooperative) CHECK(actual.hits == expected.hits);
      else if (shape.hit_k > 0) check_hits_within_error(problem, actual, expected);
    }
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace

TEST_CASE("window_scores on Vulkan equals the CPU reference") {
  check_against_cpu(make_shape(4, 4, 64, 1, 7, 7, Dtype::F32));
  check_against_cpu(make_shape(6, 2, 96, 5, 300, 1, Dtype::F16, KVC_ROPE_NEOX));
  check_against_cpu(make_shape(8, 1, 128, 32, 1001, 0, Dtype::F32, KVC_ROPE_INTERLEAVED));
  check_against_cpu(make_shape(8, 2, 64, 8, 5000, 600, Dtype::F16, KVC_ROPE_NEOX));
  check_against_cpu(make_shape(4, 2, 128, 3, 2500, 77, Dtype::F32));
}

TEST_CASE("window logits take cooperative matrices wherever the device offers them") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const vk::Device& device = gpu->device();
  const bool cooperative = device.matrix_path() == vk::MatrixPath::Cooperative;
  MESSAGE(device.name(), ": ", device.matrix_path_detail());
  // Lavapipe has no cooperative matrices: the SIMT fallback (CI checks this).
  if (device.properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) CHECK(!cooperative);
  for (uint32_t head_dim : {16u, 64u, 96u, 128u}) {
    ops::WindowScoresShape shape = make_shape(32, 8, head_dim, 32, 1000, 100, Dtype::F16, KVC_ROPE_NEOX);
    CHECK(ops::window_logits_on_cooperative_matrices(*gpu, shape) == cooperative);
    shape.dtype = Dtype::F32;  // f32 caches and the other head dims keep the SIMT kernel
    CHECK(!ops::window_logits_on_cooperative_matrices(*gpu, shape));
  }
  for (uint32_t head_dim : {8u, 40u, 72u, 256u})
    CHECK(!ops::window_logits_on_cooperative_matrices(*gpu, make_shape(32, 8, head_dim, 32, 1000, 0, Dtype::F16)));
  CHECK(!ops::window_logits_on_cooperative_matrices(test::cpu_backend(), make_shape(32, 8, 128, 32, 1000, 0, Dtype::F16)));
}

TEST_CASE("window logits on cooperative matrices: tile edges, GQA, head dims, RoPE") {
  // A workgroup takes 128 rows (8 subgroups of 16) of one kv head and a run of 64-slot steps:
  // rows (group x window) just inside and past a subgroup's 16 and a workgroup's 128, at GQA
  // ratios 1, 3 and 8; prefixes inside one step, on a step's end, one past it and ending
  // mid-chunk (the logits leave 32 slots at a time), and long enough that workgroups take
  // several steps, the last run cut short. Runs through check_against_cpu on both kernels.
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  if (gpu->device().matrix_path() != vk::MatrixPath::Cooperative) {
    MESSAGE("skipped: ", gpu->device().matrix_path_detail());
    return;
  }
  // Each shape also without hits: where one workgroup holds a kv head's rows (group x window <=
  // 128) the sums come from a second pass over the keys instead of the logits.
  auto check = [&](ops::WindowScoresShape shape) {
    CHECK(ops::window_logits_on_cooperative_matrices(*gpu, shape));
    check_against_cpu(shape);
    shape.hit_k = 0;
    check_against_cpu(shape);
  };
  const uint32_t gqa[][2] = {{4, 4}, {6, 2}, {8, 1}};
  const kvc_rope_style ropes[] = {KVC_ROPE_NONE, KVC_ROPE_NEOX, KVC_ROPE_INTERLEAVED};
  uint32_t variant = 0;
  for (const auto& heads : gqa)
    for (uint32_t window : {1u, 5u, 16u, 17u, 32u})
      for (uint32_t prefix : {7u, 128u, 129u, 1001u}) {
        const uint32_t hit_k = prefix > 40 ? prefix / 9 : prefix / 2;
        check(make_shape(heads[0], heads[1], 64, window, prefix, hit_k, Dtype::F16, ropes[variant++ % 3]));
      }
  // Runs of several steps (the host aims at 256 workgroups), without hits (at these lengths
  // some row's rank-K bound would lie within 1e-5 of a tie in nearly every draw).
  check_against_cpu(make_shape(8, 2, 128, 16, 40001, 0, Dtype::F16, KVC_ROPE_NEOX));  // sums: 626 steps, 5 a workgroup, the last 1
  check_against_cpu(make_shape(4, 1, 64, 32, 65700, 0, Dtype::F16));  // sums: 1027 steps, 5 a workgroup, the last 2 (of 36 slots)
  check_against_cpu(make_shape(8, 1, 64, 20, 30001, 0, Dtype::F16, KVC_ROPE_NEOX));  // two row tiles, logits: 469 steps, 4 a workgroup, the last 1
  // head_dim 48: a step's keys are 384 items, so some threads stage one and others two.
  check_against_cpu(make_shape(6, 2, 48, 16, 20001, 0, Dtype::F16, KVC_ROPE_NEOX, 32));  // sums: 313 steps, 3 a workgroup, the last 1
  for (uint32_t head_dim : {16u, 48u, 112u, 128u}) {
    check(make_shape(8, 2, head_dim, 17, 300, 40, Dtype::F16, KVC_ROPE_NEOX, head_dim / 2));
    check(make_shape(8, 1, head_dim, 32, 700, 64, Dtype::F16, KVC_ROPE_INTERLEAVED));
  }
}

}  // namespace kvc
