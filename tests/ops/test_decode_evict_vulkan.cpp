// decode_evict on Vulkan: STREAMING's single eviction in the dispatch that merges the decode's
// splits (evict_one beside the merge's workgroups), and the scored rules' step from the
// decode's logits (attention, then eviction_scores over many workgroups and evict_one, which a
// step may leave for its end: decode_evict_deferring, evict_deferred), each against the same
// step as two ops on Vulkan (attention, then eviction_step) bit for bit (outputs, kept tokens,
// ranks, S and C), and against the CPU reference (decode_evict_cpu): STREAMING's choices read
// no score, so both backends keep the same tokens at every step; the scored rules' choices may
// part at a near tie of S (f32 sums of exp, whose rounding the backends need not share), so
// their outputs are compared while no eviction has happened (scoring only) and at the first,
// whose attention precedes it. eviction_step's own test compares its choices with the CPU's on
// scores made free of near ties.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/decode_evict.h"
#include "support/eviction_stream.h"
#include "support/test_support.h"

namespace kvc {
namespace {

// What a stream varies besides its rule, dtype, group and capacity.
struct StreamLayout {
  uint32_t head_dim = 24;
  uint32_t window = 19;     // the recent window (the scored rules)
  uint32_t tree_first = 0;  // the tree rules' first scope: ranks sinks + tree_first and the next
};

// `steps` decode steps of random queries into a cache of `capacity` under `rule` (5 sinks, 3 kv
// heads of `group` query heads), `batch` steps per submission.
void compare_decode(Backend& gpu, ops::EvictionRule rule, Dtype dtype, uint32_t group, uint32_t capacity, uint32_t steps,
                    uint32_t batch, const StreamLayout& layout = {}) {
  const uint32_t kv_heads = 3, dim = layout.head_dim, q_heads = kv_heads * group;
  ops::EvictionShape shape = test::eviction_stream_shape(rule, capacity, 5, layout.window, kv_heads, dim, dtype);
  shape.num_q_heads = q_heads;
  shape.tree_first = layout.tree_first;
  test::EvictionStream fused(gpu, shape, capacity), two_ops(gpu, shape, capacity), reference(test::cpu_backend(), shape, capacity);
  const bool scored = rule != ops::EvictionRule::Oldest;
  const size_t row_bytes = size_t(q_heads) * dim * dtype_size(dtype);
  const size_t stride = (row_bytes + 255) / 256 * 256;  // each step's q and out at an aligned offset
  INFO(std::string(dtype_name(dtype)), " rule ", uint32_t(rule), " group ", group, " capacity ", capacity, " head_dim ", dim,
       " window ", layout.window, " tree_first ", layout.tree_first);
  for (uint32_t done = 0; done < steps; done += batch) {
    std::vector<unsigned char> queries(stride * batch);
    for (uint32_t step = 0; step < batch; ++step) {
      std::vector<float> q = test::random_floats(size_t(q_heads) * dim, -3.0f, 3.0f);
      // The scored rules' queries leave out the keys' token indices (elements 0 and 1 of a
      // row, support/eviction_stream.cpp), so that probabilities neither all sit on the
      // newest token nor underflow to zero: S stays a score that orders tokens.
      if (scored)
        for (uint32_t head = 0; head < q_heads; ++head) q[size_t(head) * dim] = q[size_t(head) * dim + 1] = 0.0f;
      const std::vector<unsigned char> bytes = test::encode(q, dtype);
      std::copy(bytes.begin(), bytes.end(), queries.begin() + step * stride);
    }
    std::vector<std::vector<unsigned char>> outputs;
    for (test::EvictionStream* stream : {&fused, &two_ops, &reference}) {
      auto q_tensor = test::make_tensor(stream->backend, queries.data(), queries.size());
      auto out_tensor = test::make_poisoned(stream->backend, queries.size());
      stream->backend.begin();
      for (uint32_t step = 0; step < batch; ++step)
        stream->record_token_decode(View{q_tensor.get(), step * stride}, View{out_tensor.get(), step * stride},
                                    stream == &two_ops ? test::EvictionStream::DecodeRoute::TwoOps
                                                       : test::EvictionStream::DecodeRoute::Fused);
      stream->backend.submit();
      outputs.push_back(test::read_tensor(stream->backend, *out_tensor, out_tensor->bytes()));
    }
    REQUIRE(outputs[0] == outputs[1]);
    const auto kept = fused.kept_tokens();
    REQUIRE(kept == two_ops.kept_tokens());
    REQUIRE(fused.state_bytes() == two_ops.state_bytes());
    if (!scored) REQUIRE(kept == reference.kept_tokens());
    for (uint32_t step = 0; step < batch; ++step) {
      if (scored && done + step > capacity) break;  // step capacity + 1 (0-based: capacity) is the first eviction
      std::vector<unsigned char> gpu_row(outputs[0].begin() + step * stride, outputs[0].begin() + step * stride + row_bytes);
      std::vector<unsigned char> cpu_row(outputs[2].begin() + step * stride, outputs[2].begin() + step * stride + row_bytes);
      const std::vector<float> gpu_out = test::decode(gpu_row, dtype), cpu_out = test::decode(cpu_row, dtype);
      // The rows are token indices up to ~1000 (support/eviction_stream.cpp): a relative bound.
      const double bound = dtype == Dtype::F16 ? 2e-3 : 2e-5;
      for (size_t i = 0; i < gpu_out.size(); ++i)
        if (std::fabs(gpu_out[i] - cpu_out[i]) > bound * std::max(1.0f, std::fabs(cpu_out[i])))
          FAIL_CHECK("step " << done + step << " element " << i << ": " << gpu_out[i] << " vs " << cpu_out[i]);
    }
  }
}

// A step's layers as `capacities.size()` streams under `rule` (3 kv heads of `group` query
// heads, 5 sinks): each token's decode steps by decode_evict_deferring, layer after layer, then
// what they left by evict_deferred, all in one call (layers alike share its dispatches) or, every
// third token, one call a layer (the single-layer kernels, as a settled layer takes them);
// against each layer's same steps as attention, then eviction_step, bit for bit.
void compare_deferred(Backend& gpu, ops::EvictionRule rule, Dtype dtype, uint32_t group, const std::vector<uint32_t>& capacities,
                      uint32_t steps, uint32_t batch) {
  const uint32_t kv_heads = 3, dim = 24, q_heads = kv_heads * group;
  std::vector<std::unique_ptr<test::EvictionStream>> deferred, two_ops;
  for (uint32_t capacity : capacities) {
    ops::EvictionShape shape = test::eviction_stream_shape(rule, capacity, 5, 19, kv_heads, dim, dtype);
    shape.num_q_heads = q_heads;
    deferred.push_back(std::make_unique<test::EvictionStream>(gpu, shape, capacity));
    two_ops.push_back(std::make_unique<test::EvictionStream>(gpu, shape, capacity));
  }
  const size_t layers = capacities.size(), row_bytes = size_t(q_heads) * dim * dtype_size(dtype);
  const size_t stride = (row_bytes + 255) / 256 * 256;  // each (step, layer)'s q and out at an aligned offset
  INFO(std::string(dtype_name(dtype)), " rule ", uint32_t(rule), " group ", group, " layers ", layers);
  for (uint32_t done = 0; done < steps; done += batch) {
    std::vector<unsigned char> queries(stride * batch * layers);
    for (size_t row = 0; row < batch * layers; ++row) {
      std::vector<float> q = test::random_floats(size_t(q_heads) * dim, -3.0f, 3.0f);
      for (uint32_t head = 0; head < q_heads; ++head) q[size_t(head) * dim] = q[size_t(head) * dim + 1] = 0.0f;  // as compare_decode
      const std::vector<unsigned char> bytes = test::encode(q, dtype);
      std::copy(bytes.begin(), bytes.end(), queries.begin() + row * stride);
    }
    std::vector<std::vector<unsigned char>> outputs;
    for (auto* streams : {&deferred, &two_ops}) {
      auto q_tensor = test::make_tensor(gpu, queries.data(), queries.size());
      auto out_tensor = test::make_poisoned(gpu, queries.size());
      gpu.begin();
      for (uint32_t step = 0; step < batch; ++step) {
        std::vector<ops::DeferredEviction> evictions;
        for (size_t layer = 0; layer < layers; ++layer) {
          const size_t at = (step * layers + layer) * stride;
          const auto left = (*streams)[layer]->record_token_decode(
              View{q_tensor.get(), at}, View{out_tensor.get(), at},
              streams == &deferred ? test::EvictionStream::DecodeRoute::Deferred : test::EvictionStream::DecodeRoute::TwoOps);
          if (left) evictions.push_back(*left);
        }
        if ((done + step) % 3 == 2) {
          for (const ops::DeferredEviction& eviction : evictions) ops::evict_deferred(gpu, {eviction});
        } else {
          ops::evict_deferred(gpu, evictions);
        }
      }
      gpu.submit();
      outputs.push_back(test::read_tensor(gpu, *out_tensor, out_tensor->bytes()));
    }
    REQUIRE(outputs[0] == outputs[1]);
    for (size_t layer = 0; layer < layers; ++layer) {
      INFO("layer ", layer, " after step ", done + batch);
      REQUIRE(deferred[layer]->kept_tokens() == two_ops[layer]->kept_tokens());
      REQUIRE(deferred[layer]->state_bytes() == two_ops[layer]->state_bytes());
    }
  }
}

}  // namespace

TEST_CASE("decode_evict on Vulkan: STREAMING's eviction in the merge's dispatch equals attention, then eviction_step") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (uint32_t group : {1u, 4u}) compare_decode(*gpu, ops::EvictionRule::Oldest, dtype, group, 53, 240, 60);
  // Two workgroups of slots per kv head (512 each) beside the merge's, the last slot in the
  // second, a group of 7.
  compare_decode(*gpu, ops::EvictionRule::Oldest, Dtype::F16, 7, 600, 680, 170);
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("decode_evict on Vulkan: H2O's, TOVA's and TreeKV's step over many workgroups equals attention, then eviction_step") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (ops::EvictionRule rule : {ops::EvictionRule::Accumulated, ops::EvictionRule::CurrentQuery, ops::EvictionRule::Tree,
                                 ops::EvictionRule::TreeLeft}) {
    // One slot block per kv head: scoring alone for 53 steps, then an eviction a step.
    compare_decode(*gpu, rule, Dtype::F32, 1, 53, 120, 40);
    compare_decode(*gpu, rule, Dtype::F16, 4, 53, 120, 40);
    // Several slot blocks per kv head, the last partial (three of 512 slots; TOVA's nine of
    // 128), and two workgroups of evict_one (1024 slots each): each chooses from every block's
    // candidates. The tree rules' first scope, ranks 511 and 512, sits in slots 511 and 512 of
    // two blocks.
    compare_decode(*gpu, rule, Dtype::F16, 7, 1100, 1140, 380, {24, 19, ops::rule_keeps_counts(rule) ? 506u : 0u});
  }
  // No recent window: the newest token, in the last slot, may be H2O's victim (the freed slot is
  // the last one, nothing moves).
  compare_decode(*gpu, ops::EvictionRule::Accumulated, Dtype::F32, 2, 53, 160, 40, {24, 0, 0});
  // A group of 16 at head_dim 128.
  compare_decode(*gpu, ops::EvictionRule::Accumulated, Dtype::F16, 16, 1100, 1120, 560, {128, 19, 0});
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("decode_evict on Vulkan: H2O's, TOVA's and TreeKV's evictions left for the step's end, many layers a dispatch") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (ops::EvictionRule rule : {ops::EvictionRule::Accumulated, ops::EvictionRule::CurrentQuery, ops::EvictionRule::Tree,
                                 ops::EvictionRule::TreeLeft}) {
    // Three layers alike (one dispatch) and one of another size (a dispatch of its own).
    compare_deferred(*gpu, rule, Dtype::F32, 1, {37, 37, 37, 41}, 90, 30);
    compare_deferred(*gpu, rule, Dtype::F16, 4, {37, 41, 37}, 90, 45);
  }
  // Three slot blocks per kv head.
  compare_deferred(*gpu, ops::EvictionRule::Tree, Dtype::F16, 2, {1100, 1100}, 1110, 555);
  // A group of 12: the decode stores a key's logits head by head (blocks of 6), the scoring
  // loads them 4 at a time.
  compare_deferred(*gpu, ops::EvictionRule::CurrentQuery, Dtype::F32, 12, {37, 41}, 70, 35);
  // 33 layers alike: past the 32 a dispatch binds (on a device that allows them), so one
  // dispatch of the many-layer kernels and one of the single-layer ones.
  compare_deferred(*gpu, ops::EvictionRule::Accumulated, Dtype::F16, 2, std::vector<uint32_t>(33, 29), 40, 40);
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("decode_evict: the candidates a step leaves follow its rule's slot blocks, within a dispatch's 65535") {
  // An entry (3 words) per slot block and kv head, at least 2 (the tree rules' scope): blocks
  // of 512 slots, TOVA's of 128 until those would pass 65535 blocks, then 512 as the others'.
  const auto entries = [](ops::EvictionRule rule, uint32_t slots) {
    return ops::deferred_candidates_bytes(rule, 1, slots) / (3 * sizeof(uint32_t));
  };
  for (ops::EvictionRule rule : {ops::EvictionRule::Accumulated, ops::EvictionRule::Tree, ops::EvictionRule::TreeLeft}) {
    CHECK(entries(rule, 100) == 2);
    CHECK(entries(rule, 4097) == 9);
    CHECK(entries(rule, 9000000) == 17579);
  }
  CHECK(entries(ops::EvictionRule::CurrentQuery, 100) == 2);
  CHECK(entries(ops::EvictionRule::CurrentQuery, 4097) == 33);
  CHECK(entries(ops::EvictionRule::CurrentQuery, 65535u * 128) == 65535);
  CHECK(entries(ops::EvictionRule::CurrentQuery, 65535u * 128 + 1) == 16384);
  CHECK(ops::deferred_candidates_bytes(ops::EvictionRule::CurrentQuery, 8, 4097) == 8 * 33 * 3 * sizeof(uint32_t));
}

}  // namespace kvc
