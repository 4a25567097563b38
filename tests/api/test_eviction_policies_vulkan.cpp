// STREAMING, H2O, TOVA and TREEKV through the C API, on Vulkan and on the CPU: token by token
// (append, attend), the cache must hold exactly what each paper's rule keeps when it is fed
// the attention scores kvc_attend reports (support/eviction_stream's formula), with positions
// re-assigned to ranks; the sinks and the recent window stay, and the size never exceeds c.
// A twin cache takes the same tokens and queries without asking for scores, the engine's
// decode step (on Vulkan STREAMING's eviction in the attention's merge dispatch and the scored
// rules' in eviction_scores and evict_one, ops/decode_evict.h): it must give the same outputs
// and hold the same rows in the same slots.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "common/dtype.h"
#include "support/api_helpers.h"
#include "support/eviction_stream.h"
#include "support/test_support.h"

namespace kvc {
namespace {

struct PolicyCase {
  kvc_policy policy;
  uint32_t select_left_token;
  ops::EvictionRule rule;
};

kvc_eviction_params eviction_params(uint32_t sinks, uint32_t window) {
  kvc_eviction_params params = kvc_eviction_params_default();
  params.sinks = sinks;
  params.recent_window = window;
  return params;
}

// A cache of small_cache_desc's shape under `policy` (params are read at creation only).
test::CachePtr make_eviction_cache(kvc_context* context, kvc_dtype dtype, uint32_t capacity, kvc_policy policy,
                                   const kvc_eviction_params& params, kvc_cache_desc& desc) {
  desc = test::small_cache_desc(dtype, capacity);
  desc.policy = policy;
  desc.policy_params = &params;
  return test::make_cache(context, desc);
}

// Every eviction policy, TreeKV with each of its choices.
const PolicyCase kPolicyCases[] = {{KVC_POLICY_STREAMING, 0, ops::EvictionRule::Oldest},
                                   {KVC_POLICY_H2O, 0, ops::EvictionRule::Accumulated},
                                   {KVC_POLICY_TOVA, 0, ops::EvictionRule::CurrentQuery},
                                   {KVC_POLICY_TREEKV, 0, ops::EvictionRule::Tree},
                                   {KVC_POLICY_TREEKV, 1, ops::EvictionRule::TreeLeft}};

// A cache of small_cache_desc's shape under `policy_case` with `sinks` and `window`.
test::CachePtr make_case_cache(kvc_context* context, kvc_dtype dtype, uint32_t capacity, const PolicyCase& policy_case,
                               uint32_t sinks, uint32_t window, kvc_cache_desc& desc) {
  kvc_eviction_params params = eviction_params(sinks, window);
  params.select_left_token = policy_case.select_left_token;
  test::CachePtr cache = make_eviction_cache(context, dtype, capacity, policy_case.policy, params, desc);
  desc.policy_params = nullptr;  // read at creation only: `params` goes now
  return cache;
}

}  // namespace

TEST_CASE("eviction policies keep what their papers' rules keep, on Vulkan and on the CPU") {
  const uint32_t capacity = 24, sinks = 2, window = 5, tokens = 60;
  for (kvc_backend backend : {KVC_BACKEND_VULKAN, KVC_BACKEND_CPU})
    for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
      for (const PolicyCase& policy_case : kPolicyCases) {
        const Dtype storage = static_cast<Dtype>(dtype);
        test::ContextPtr context = test::make_context(backend);
        REQUIRE(context);
        kvc_cache_desc desc;
        test::CachePtr cache = make_case_cache(context.get(), dtype, capacity, policy_case, sinks, window, desc);
        test::CachePtr twin = make_case_cache(context.get(), dtype, capacity, policy_case, sinks, window, desc);
        const uint32_t kv = desc.num_kv_heads, dim = desc.head_dim;
        const size_t row_bytes = dim * dtype_size(storage);

        ops::EvictionShape rule_shape;
        rule_shape.rule = policy_case.rule;
        rule_shape.num_kv_heads = kv;
        rule_shape.sinks = sinks;
        rule_shape.recent_window = policy_case.policy == KVC_POLICY_STREAMING ? capacity - sinks : window;
        std::vector<test::EvictionByFormula> formulas(desc.num_layers, test::EvictionByFormula(rule_shape, capacity));
        // Per layer and kv head: each appended K row -> its token index (random rows are distinct).
        std::vector<std::vector<std::map<std::vector<unsigned char>, uint32_t>>> token_of_row(
            desc.num_layers, std::vector<std::map<std::vector<unsigned char>, uint32_t>>(kv));
        INFO("backend ", backend, " ", std::string(dtype_name(storage)), " policy ",
             policy_case.policy, " left ", policy_case.select_left_token);
        bool comparable = true;
        for (uint32_t token = 0; token < tokens && comparable; ++token)
          for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
            std::vector<float> k = test::random_floats(kv * dim), v = test::random_floats(kv * dim),
                               q = test::random_floats(desc.num_q_heads * dim, -3, 3);
            const auto k_bytes = test::encode(k, storage), v_bytes = test::encode(v, storage), q_bytes = test::encode(q, storage);
            for (uint32_t h = 0; h < kv; ++h)
              token_of_row[layer][h][std::vector<unsigned char>(k_bytes.begin() + h * row_bytes, k_bytes.begin() + (h + 1) * row_bytes)] = token;
            REQUIRE(kvc_cache_append(cache.get(), layer, 1, dtype, k_bytes.data(), v_bytes.data()) == KVC_OK);
            const test::LayerSnapshot before = test::snapshot(cache.get(), layer);
            std::vector<unsigned char> out(q_bytes.size());
            std::vector<float> scores(kv * before.slots);
            REQUIRE(kvc_attend(cache.get(), layer, 1, dtype, q_bytes.data(), out.data(), scores.data()) == KVC_OK);
            REQUIRE(kvc_cache_append(twin.get(), layer, 1, dtype, k_bytes.data(), v_bytes.data()) == KVC_OK);
            std::vector<unsigned char> twin_out(q_bytes.size());
            REQUIRE(kvc_attend(twin.get(), layer, 1, dtype, q_bytes.data(), twin_out.data(), nullptr) == KVC_OK);
            CHECK(twin_out == out);
            // The formula sees the reported scores by rank (a slot's position is its rank).
            std::vector<std::vector<double>> by_rank(kv, std::vector<double>(before.slots));
            for (uint32_t h = 0; h < kv; ++h)
              for (uint32_t slot = 0; slot < before.slots; ++slot)
                by_rank[h][before.positions[h * before.slots + slot]] = scores[h * before.slots + slot];
            formulas[layer].add_token(by_rank);
            // Float sums decide within ~1e-7 of the double formula; closer calls may go either way.
            if (formulas[layer].min_margin < 1e-6) {
              MESSAGE("near-tie at token ", token, ": later steps are not compared");
              comparable = false;
              break;
            }
            const test::LayerSnapshot after = test::snapshot(cache.get(), layer);
            REQUIRE(after.slots == std::min(token + 1, capacity));
            CHECK(test::snapshot(twin.get(), layer) == after);
            for (uint32_t h = 0; h < kv; ++h) {
              std::vector<uint32_t> kept(after.slots, ~0u);
              for (uint32_t slot = 0; slot < after.slots; ++slot) {
                const auto row = after.k.begin() + (size_t(h) * after.slots + slot) * row_bytes;
                const auto found = token_of_row[layer][h].find(std::vector<unsigned char>(row, row + row_bytes));
                REQUIRE(found != token_of_row[layer][h].end());
                const int32_t rank = after.positions[h * after.slots + slot];
                REQUIRE(rank >= 0);
                REQUIRE(uint32_t(rank) < after.slots);
                kept[rank] = found->second;
              }
              CHECK(kept == formulas[layer].kept[h]);
            }
          }
        kvc_cache_stats stats{sizeof(kvc_cache_stats)};
        REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
        if (comparable) CHECK(stats.compressions == desc.num_layers * (tokens - capacity));
        kvc_context_info info{sizeof(kvc_context_info)};
        REQUIRE(kvc_context_info_get(context.get(), &info) == KVC_OK);
        CHECK(info.validation_messages == 0);
      }
}

TEST_CASE("eviction policies inside steps: the evictions left for a step's end equal the same calls one by one") {
  // On Vulkan a step's H2O, TOVA and TreeKV decode steps record their attention alone and
  // leave the scoring and eviction of every layer for the step's end (ops/decode_evict.h); a
  // layer the step touches again settles first. Steps of three tokens of every layer take both.
  const uint32_t capacity = 24, sinks = 2, window = 5, tokens = 60, per_step = 3;
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
    for (const PolicyCase& policy_case : kPolicyCases) {
      test::ContextPtr context = test::make_context(KVC_BACKEND_VULKAN);
      REQUIRE(context);
      kvc_cache_desc desc;
      test::CachePtr one_by_one = make_case_cache(context.get(), dtype, capacity, policy_case, sinks, window, desc);
      test::CachePtr stepped = make_case_cache(context.get(), dtype, capacity, policy_case, sinks, window, desc);
      INFO(std::string(dtype_name(static_cast<Dtype>(dtype))), " policy ", policy_case.policy, " left ",
           policy_case.select_left_token);
      for (uint32_t first = 0; first < tokens; first += per_step) {
        std::vector<std::vector<test::StepInputs>> inputs(per_step);  // [token][layer]
        std::vector<std::vector<std::vector<unsigned char>>> stepped_out(per_step);
        for (uint32_t token = 0; token < per_step; ++token)
          for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
            inputs[token].push_back(test::random_step_inputs(desc, 1));
            stepped_out[token].emplace_back(inputs[token][layer].q.size());
          }
        REQUIRE(kvc_step_begin(context.get()) == KVC_OK);
        for (uint32_t token = 0; token < per_step; ++token)
          for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
            const test::StepInputs& in = inputs[token][layer];
            REQUIRE(kvc_cache_append(stepped.get(), layer, 1, dtype, in.k.data(), in.v.data()) == KVC_OK);
            REQUIRE(kvc_attend(stepped.get(), layer, 1, dtype, in.q.data(), stepped_out[token][layer].data(), nullptr) == KVC_OK);
          }
        REQUIRE(kvc_step_end(context.get()) == KVC_OK);
        REQUIRE(kvc_step_wait(context.get(), UINT64_MAX) == KVC_OK);
        for (uint32_t token = 0; token < per_step; ++token)
          for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
            const test::StepInputs& in = inputs[token][layer];
            std::vector<unsigned char> out(in.q.size());
            REQUIRE(kvc_cache_append(one_by_one.get(), layer, 1, dtype, in.k.data(), in.v.data()) == KVC_OK);
            REQUIRE(kvc_attend(one_by_one.get(), layer, 1, dtype, in.q.data(), out.data(), nullptr) == KVC_OK);
            INFO("token ", first + token, " layer ", layer);
            CHECK(out == stepped_out[token][layer]);
          }
        for (uint32_t layer = 0; layer < desc.num_layers; ++layer) CHECK(test::snapshot(stepped.get(), layer) == test::snapshot(one_by_one.get(), layer));
      }
      kvc_context_info info{sizeof(kvc_context_info)};
      REQUIRE(kvc_context_info_get(context.get(), &info) == KVC_OK);
      CHECK(info.validation_messages == 0);
    }
}

TEST_CASE("TREEKV prefill: a prompt longer than c is cut by whole blocks, then decoding goes on") {
  const uint32_t capacity = 64, sinks = 3, window = 13, block = 8, prompt = 301;
  for (kvc_backend backend : {KVC_BACKEND_VULKAN, KVC_BACKEND_CPU})
    for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
      const Dtype storage = static_cast<Dtype>(dtype);
      test::ContextPtr context = test::make_context(backend);
      REQUIRE(context);
      kvc_eviction_params params = eviction_params(sinks, window);
      params.prefill_block = block;
      params.chunk_slots = prompt;
      kvc_cache_desc desc;
      test::CachePtr cache = make_eviction_cache(context.get(), dtype, capacity, KVC_POLICY_TREEKV, params, desc);
      const uint32_t kv = desc.num_kv_heads, dim = desc.head_dim;
      const size_t row_bytes = dim * dtype_size(storage);
      INFO("backend ", backend, " ", std::string(dtype_name(storage)));
      std::vector<float> k = test::random_floats(prompt * kv * dim), v = test::random_floats(prompt * kv * dim),
                         q = test::random_floats(prompt * desc.num_q_heads * dim, -3, 3);
      const auto k_bytes = test::encode(k, storage), v_bytes = test::encode(v, storage), q_bytes = test::encode(q, storage);
      std::vector<unsigned char> out(q_bytes.size());
      REQUIRE(kvc_cache_append(cache.get(), 0, prompt, dtype, k_bytes.data(), v_bytes.data()) == KVC_OK);
      REQUIRE(kvc_attend(cache.get(), 0, prompt, dtype, q_bytes.data(), out.data(), nullptr) == KVC_OK);
      // (301 - 3 - 13) = 285 middle tokens: 35 blocks after dropping the oldest 5; the tree
      // keeps floor((64 - 16) / 8) = 6 of them.
      const uint32_t middle_first = sinks + 5, kept = sinks + window + 6 * block;
      const test::LayerSnapshot shot = test::snapshot(cache.get(), 0);
      REQUIRE(shot.slots == kept);
      for (uint32_t h = 0; h < kv; ++h) {
        const auto token_at = [&](uint32_t slot) {  // the prompt token whose K row the slot holds
          for (uint32_t token = 0; token < prompt; ++token)
            if (std::equal(shot.k.begin() + (size_t(h) * kept + slot) * row_bytes, shot.k.begin() + (size_t(h) * kept + slot + 1) * row_bytes,
                           k_bytes.begin() + (size_t(token) * kv + h) * row_bytes))
              return token;
          return ~0u;
        };
        for (uint32_t slot = 0; slot < kept; ++slot) CHECK(shot.positions[h * kept + slot] == int32_t(slot));
        for (uint32_t s = 0; s < sinks; ++s) CHECK(token_at(s) == s);
        for (uint32_t r = 0; r < window; ++r) CHECK(token_at(kept - 1 - r) == prompt - 1 - r);
        uint32_t previous_block = 0;
        for (uint32_t b = 0; b < 6; ++b) {  // whole aligned blocks, in order
          const uint32_t first = token_at(sinks + b * block);
          REQUIRE(first >= middle_first);
          CHECK((first - middle_first) % block == 0);
          CHECK((b == 0 || first / block > previous_block));
          previous_block = first / block;
          for (uint32_t i = 1; i < block; ++i) CHECK(token_at(sinks + b * block + i) == first + i);
        }
      }
      for (uint32_t step = 0; step < 20; ++step) {
        std::vector<float> k1 = test::random_floats(kv * dim), q1 = test::random_floats(desc.num_q_heads * dim);
        const auto k1_bytes = test::encode(k1, storage), q1_bytes = test::encode(q1, storage);
        std::vector<unsigned char> out1(q1_bytes.size());
        REQUIRE(kvc_cache_append(cache.get(), 0, 1, dtype, k1_bytes.data(), k1_bytes.data()) == KVC_OK);
        REQUIRE(kvc_attend(cache.get(), 0, 1, dtype, q1_bytes.data(), out1.data(), nullptr) == KVC_OK);
        uint32_t slots = 0;
        REQUIRE(kvc_cache_layer_slots(cache.get(), 0, &slots) == KVC_OK);
        CHECK(slots == std::min(kept + step + 1, capacity));
      }
      kvc_context_info info{sizeof(kvc_context_info)};
      REQUIRE(kvc_context_info_get(context.get(), &info) == KVC_OK);
      CHECK(info.validation_messages == 0);
    }
}

}  // namespace kvc
