// The Vulkan eviction step against the CPU reference over a 20,000-token stream per rule:
// both are fed the same per-slot scores (f32 in every storage dtype, so decisions are exact,
// no tie can fall differently) and must keep the same tokens in the same slots, bit for bit.
#include <doctest/doctest.h>

#include "support/eviction_stream.h"
#include "support/test_support.h"

namespace kvc {

TEST_CASE("eviction_step on Vulkan evicts exactly the CPU reference's tokens") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  using ops::EvictionRule;
  // Odd sizes: 3 kv heads, head_dim 24, a cache of 101 with 5 sinks and a window of 19.
  const uint32_t capacity = 101, sinks = 5, window = 19, tokens = 20000, batch = 2000;
  const size_t score_stride = ((size_t(3) * (capacity + 1) * 4 + 255) / 256) * 256;  // descriptor offsets stay aligned
  for (Dtype dtype : {Dtype::F32, Dtype::F16})
    for (EvictionRule rule : {EvictionRule::Oldest, EvictionRule::Accumulated, EvictionRule::CurrentQuery, EvictionRule::Tree,
                              EvictionRule::TreeLeft}) {
      const ops::EvictionShape shape = test::eviction_stream_shape(rule, capacity, sinks, window, 3, 24, dtype);
      test::EvictionStream on_gpu(*gpu, shape, capacity), on_cpu(test::cpu_backend(), shape, capacity);
      INFO(dtype_name(dtype), " rule ", uint32_t(rule));
      for (uint32_t done = 0; done < tokens; done += batch) {
        std::vector<float> scores(score_stride / 4 * batch);
        for (uint32_t step = 0; step < batch; ++step) {
          const std::vector<float> fresh = test::random_floats(size_t(3) * (capacity + 1), 0.001f, 1.0f);
          std::copy(fresh.begin(), fresh.end(), scores.begin() + step * score_stride / 4);
        }
        for (test::EvictionStream* stream : {&on_gpu, &on_cpu}) {
          auto score_tensor = test::make_tensor(stream->backend, scores.data(), scores.size() * 4);
          stream->backend.begin();
          for (uint32_t step = 0; step < batch; ++step) stream->record_token(View{score_tensor.get(), step * score_stride});
          stream->backend.submit();
        }
        const auto kept = on_gpu.kept_tokens();
        REQUIRE(kept == on_cpu.kept_tokens());
        REQUIRE(on_gpu.state_bytes() == on_cpu.state_bytes());
        for (const auto& head : kept) {
          REQUIRE(head.size() == capacity);
          for (uint32_t s = 0; s < sinks; ++s) CHECK(head[s] == s);
          for (uint32_t r = 0; r < shape.recent_window; ++r) CHECK(head[capacity - 1 - r] == done + batch - 1 - r);
        }
      }
    }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
