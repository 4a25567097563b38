// The Vulkan eviction step against the CPU reference, per rule: both are fed the same per-slot
// scores (f32 in every storage dtype, so decisions are exact and no tie can fall differently)
// and must keep the same tokens in the same slots, with the same S and C, bit for bit.
#include <doctest/doctest.h>

#include <algorithm>

#include "support/eviction_stream.h"
#include "support/test_support.h"

namespace kvc {
namespace {

using ops::EvictionRule;
constexpr EvictionRule kRules[] = {EvictionRule::Oldest, EvictionRule::Accumulated, EvictionRule::CurrentQuery,
                                   EvictionRule::Tree, EvictionRule::TreeLeft};

// Streams `steps` appends of 1..max_chunk tokens (a chunk evicts several) into a cache of
// `capacity` with 5 sinks and a window of 19, 3 kv heads of head_dim 24, on Vulkan and on the
// CPU, comparing both every `batch` steps (one submission each).
void compare_streams(Backend& gpu, EvictionRule rule, Dtype dtype, uint32_t capacity, uint32_t steps, uint32_t batch,
                     uint32_t max_chunk) {
  const uint32_t sinks = 5, window = 19;
  const ops::EvictionShape shape = test::eviction_stream_shape(rule, capacity, sinks, window, 3, 24, dtype);
  // Each step's scores start at a multiple of 256 bytes: descriptor offsets stay aligned.
  const size_t score_stride = ((size_t(3) * shape.slot_stride * 4 + 255) / 256) * 256;
  test::EvictionStream on_gpu(gpu, shape, capacity), on_cpu(test::cpu_backend(), shape, capacity);
  std::uniform_int_distribution<uint32_t> chunk(1, max_chunk);
  INFO(std::string(dtype_name(dtype)), " rule ", uint32_t(rule), " chunks up to ", max_chunk);
  for (uint32_t done = 0; done < steps; done += batch) {
    std::vector<float> scores(score_stride / 4 * batch);
    std::vector<uint32_t> counts(batch);
    for (uint32_t step = 0; step < batch; ++step) {
      counts[step] = chunk(test::rng());
      const std::vector<float> fresh = test::random_floats(size_t(3) * shape.slot_stride, 0.001f, 1.0f);
      std::copy(fresh.begin(), fresh.end(), scores.begin() + step * score_stride / 4);
    }
    for (test::EvictionStream* stream : {&on_gpu, &on_cpu}) {
      auto score_tensor = test::make_tensor(stream->backend, scores.data(), scores.size() * 4);
      stream->backend.begin();
      for (uint32_t step = 0; step < batch; ++step) stream->record_tokens(View{score_tensor.get(), step * score_stride}, counts[step]);
      stream->backend.submit();
    }
    const auto kept = on_gpu.kept_tokens();
    REQUIRE(kept == on_cpu.kept_tokens());
    REQUIRE(on_gpu.state_bytes() == on_cpu.state_bytes());
    for (const auto& head : kept) {
      REQUIRE(head.size() == capacity);
      for (uint32_t s = 0; s < sinks; ++s) CHECK(head[s] == s);
      for (uint32_t r = 0; r < shape.recent_window; ++r) CHECK(head[capacity - 1 - r] == on_gpu.tokens - 1 - r);
    }
  }
}

// As compare_streams, one token per step, the scores formed by the op from decode logits: 3 kv
// heads of `group` query heads. Each logit is its head's lse (probability 1) or 200 below it
// (probability 0 in f32): exp gave exactly 1 and 0 there on every driver tested, so S are small integers, ties are
// frequent (the rule's tie-break is exercised) and both backends still decide bit for bit.
void compare_logit_streams(Backend& gpu, EvictionRule rule, Dtype dtype, uint32_t group, uint32_t capacity, uint32_t steps,
                           uint32_t batch) {
  const uint32_t kv_heads = 3, q_heads = kv_heads * group;
  ops::EvictionShape shape = test::eviction_stream_shape(rule, capacity, 5, 19, kv_heads, 24, dtype);
  shape.num_q_heads = q_heads;
  const size_t logit_stride = ((size_t(q_heads) * shape.slot_stride * 4 + 255) / 256) * 256, lse_stride = 256;
  test::EvictionStream on_gpu(gpu, shape, capacity), on_cpu(test::cpu_backend(), shape, capacity);
  std::bernoulli_distribution attended(0.5);
  INFO(std::string(dtype_name(dtype)), " rule ", uint32_t(rule), " group ", group);
  for (uint32_t done = 0; done < steps; done += batch) {
    std::vector<float> logits(logit_stride / 4 * batch), lse(lse_stride / 4 * batch);
    for (uint32_t step = 0; step < batch; ++step) {
      const uint32_t held = std::min(done + step + 1, capacity + 1);  // the logits' row length
      const std::vector<float> heads_lse = test::random_floats(q_heads, -5.0f, 5.0f);
      for (uint32_t head = 0; head < q_heads; ++head) {
        lse[step * lse_stride / 4 + head] = heads_lse[head];
        for (uint32_t slot = 0; slot < held; ++slot)
          logits[step * logit_stride / 4 + (size_t(head / group) * held + slot) * group + head % group] =
              attended(test::rng()) ? heads_lse[head] : heads_lse[head] - 200.0f;
      }
    }
    for (test::EvictionStream* stream : {&on_gpu, &on_cpu}) {
      auto logit_tensor = test::make_tensor(stream->backend, logits.data(), logits.size() * 4);
      auto lse_tensor = test::make_tensor(stream->backend, lse.data(), lse.size() * 4);
      stream->backend.begin();
      for (uint32_t step = 0; step < batch; ++step)
        stream->record_token_logits(View{logit_tensor.get(), step * logit_stride}, View{lse_tensor.get(), step * lse_stride});
      stream->backend.submit();
    }
    REQUIRE(on_gpu.kept_tokens() == on_cpu.kept_tokens());
    REQUIRE(on_gpu.state_bytes() == on_cpu.state_bytes());
  }
}

}  // namespace

TEST_CASE("eviction_step on Vulkan forms the scores from decode logits as the CPU reference does") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (EvictionRule rule : {EvictionRule::Accumulated, EvictionRule::CurrentQuery, EvictionRule::Tree, EvictionRule::TreeLeft})
    for (uint32_t group : {1u, 3u}) compare_logit_streams(*gpu, rule, Dtype::F16, group, 53, 700, 175);
  compare_logit_streams(*gpu, EvictionRule::Accumulated, Dtype::F32, 4, 1100, 150, 150);  // 512 threads per kv head
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("eviction_step on Vulkan evicts exactly the CPU reference's tokens over 20,000 tokens") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (EvictionRule rule : kRules) compare_streams(*gpu, rule, dtype, 101, 20000, 2000, 1);
  // STREAMING's one-token step (evict_one, 1024 slots a workgroup) over three workgroups of
  // slots: victims in every one, the last slot in the third.
  compare_streams(*gpu, EvictionRule::Oldest, Dtype::F16, 2100, 4200, 2100, 1);
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("eviction_step on Vulkan equals the CPU reference when a chunk evicts several tokens") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (EvictionRule rule : kRules) compare_streams(*gpu, rule, Dtype::F32, 101, 600, 200, 8);
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("eviction_step on Vulkan equals the CPU reference on a cache of 4,200 (1,024 threads per kv head)") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  for (EvictionRule rule : {EvictionRule::Accumulated, EvictionRule::Tree}) compare_streams(*gpu, rule, Dtype::F16, 4200, 1300, 1300, 8);
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
