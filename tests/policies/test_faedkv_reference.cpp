// FAEDKV through the C API on the CPU backend against a model of the paper written here in
// double: the prompt's middle transformed (eq. 10) and pruned to the kept chunks and their
// mirrors (eq. 6), every token that leaves the recent window folded in by eq. 9 as printed
// (with the twiddle of eq. 4's sign), the segment rebuilt by eq. 5, and attention over sinks,
// segment and window (eq. 13). Also: parameters, misuse, and the bytes it holds.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <deque>
#include <set>

#include "support/api_helpers.h"
#include "support/test_support.h"

namespace kvc {
namespace {

using Complex = std::complex<double>;

constexpr uint32_t kLayers = 1, kQHeads = 4, kKvHeads = 2, kDim = 8, kCapacity = 120;

kvc_cache_desc faedkv_desc(const kvc_faedkv_params* params) {
  kvc_cache_desc desc = kvc_cache_desc_default();
  desc.num_layers = kLayers;
  desc.num_q_heads = kQHeads;
  desc.num_kv_heads = kKvHeads;
  desc.head_dim = kDim;
  desc.capacity = kCapacity;
  desc.policy = KVC_POLICY_FAEDKV;
  desc.policy_params = params;
  return desc;
}

// The paper's cache of one layer, per kv head: sinks and window as tokens, the segment as its
// pruned spectrum S (a running mean, eq. 9).
struct PaperModel {
  uint32_t sinks, window, M = 0;
  std::set<uint32_t> kept;  // bins kept: the kept chunks' and their mirrors
  std::vector<std::vector<float>> tokens_k, tokens_v;  // [head] -> every token appended, row-major
  std::vector<std::vector<Complex>> state_k, state_v;  // [head] -> [bin][dim]
  std::deque<uint32_t> window_tokens;                  // token indices in the window, oldest first
  uint64_t folded = 0;

  void append(const std::vector<float>& k, const std::vector<float>& v, uint32_t n) {
    for (uint32_t head = 0; head < kKvHeads; ++head)
      for (uint32_t t = 0; t < n; ++t) {
        const size_t row = (size_t(t) * kKvHeads + head) * kDim;
        tokens_k[head].insert(tokens_k[head].end(), &k[row], &k[row] + kDim);
        tokens_v[head].insert(tokens_v[head].end(), &v[row], &v[row] + kDim);
      }
    const uint32_t first = uint32_t(tokens_k[0].size() / kDim) - n;
    for (uint32_t t = 0; t < n; ++t) window_tokens.push_back(first + t);
    if (M == 0) return;  // the prompt: kept whole
    while (window_tokens.size() > window) {  // eq. 12: the oldest leaves the window
      const uint32_t token = window_tokens.front();
      window_tokens.pop_front();
      const double N = double(folded);
      for (uint32_t head = 0; head < kKvHeads; ++head)
        for (uint32_t k_bin = 0; k_bin < M; ++k_bin) {
          const Complex twiddle_inverse = std::polar(1.0, 2 * M_PI * k_bin / M);
          for (uint32_t d = 0; d < kDim; ++d) {
            Complex& sk = state_k[head][size_t(k_bin) * kDim + d];
            Complex& sv = state_v[head][size_t(k_bin) * kDim + d];
            sk = twiddle_inverse * (N / (N + 1) * sk + double(tokens_k[head][size_t(token) * kDim + d]) / (N + 1));
            sv = twiddle_inverse * (N / (N + 1) * sv + double(tokens_v[head][size_t(token) * kDim + d]) / (N + 1));
            if (!kept.count(k_bin)) sk = sv = 0;  // eq. 6 reapplied after each update
          }
        }
      ++folded;
    }
  }

  void end_prefill(uint32_t chunks, const std::vector<bool>& kept_chunks) {
    const uint32_t prompt = uint32_t(window_tokens.size());
    M = prompt - sinks - window;
    for (uint32_t c = 0; c < chunks; ++c)
      if (kept_chunks[c])
        for (uint64_t k = uint64_t(c) * M / chunks; k < uint64_t(c + 1) * M / chunks; ++k) kept.insert(uint32_t(k)), kept.insert(uint32_t((M - k) % M));
    for (uint32_t head = 0; head < kKvHeads; ++head) {
      state_k.emplace_back(size_t(M) * kDim), state_v.emplace_back(size_t(M) * kDim);
      for (uint32_t k_bin : kept)
        for (uint32_t n = 0; n < M; ++n)
          for (uint32_t d = 0; d < kDim; ++d) {
            const Complex twiddle = std::polar(1.0, -2 * M_PI * double(uint64_t(k_bin) * n % M) / M) / double(M);
            state_k[head][size_t(k_bin) * kDim + d] += double(tokens_k[head][size_t(sinks + n) * kDim + d]) * twiddle;
            state_v[head][size_t(k_bin) * kDim + d] += double(tokens_v[head][size_t(sinks + n) * kDim + d]) * twiddle;
          }
    }
    window_tokens.erase(window_tokens.begin(), window_tokens.end() - window);
    folded = M;
  }

  // What attention sees, per kv head: [sinks, segment (eq. 5), window] rows, and positions.
  void view(uint32_t head, std::vector<double>& k, std::vector<double>& v, std::vector<int32_t>& positions) const {
    k.clear(), v.clear(), positions.clear();
    auto token_row = [&](uint32_t token) {
      for (uint32_t d = 0; d < kDim; ++d) k.push_back(tokens_k[head][size_t(token) * kDim + d]), v.push_back(tokens_v[head][size_t(token) * kDim + d]);
      positions.push_back(int32_t(token));
    };
    for (uint32_t s = 0; s < sinks; ++s) token_row(s);
    for (uint32_t n = 0; n < M; ++n) {
      for (uint32_t d = 0; d < kDim; ++d) {
        Complex xk = 0, xv = 0;
        for (uint32_t k_bin : kept) {
          const Complex twiddle = std::polar(1.0, 2 * M_PI * double(uint64_t(k_bin) * n % M) / M);
          xk += state_k[head][size_t(k_bin) * kDim + d] * twiddle;
          xv += state_v[head][size_t(k_bin) * kDim + d] * twiddle;
        }
        k.push_back(xk.real()), v.push_back(xv.real());
      }
      positions.push_back(int32_t(sinks + n));
    }
    for (uint32_t token : window_tokens) token_row(token);
  }
};

// Attention of the newest query over the model's view (every row visible: the query's token
// is the window's newest).
std::vector<double> model_attention(const PaperModel& model, const std::vector<float>& q) {
  std::vector<double> out(size_t(kQHeads) * kDim);
  for (uint32_t head = 0; head < kQHeads; ++head) {
    std::vector<double> k, v;
    std::vector<int32_t> positions;
    model.view(head / (kQHeads / kKvHeads), k, v, positions);
    std::vector<double> logits(positions.size());
    double max_logit = -INFINITY, total = 0;
    for (size_t j = 0; j < logits.size(); ++j) {
      for (uint32_t d = 0; d < kDim; ++d) logits[j] += q[head * kDim + d] * k[j * kDim + d] / std::sqrt(double(kDim));
      max_logit = std::max(max_logit, logits[j]);
    }
    for (double& logit : logits) total += (logit = std::exp(logit - max_logit));
    for (size_t j = 0; j < logits.size(); ++j)
      for (uint32_t d = 0; d < kDim; ++d) out[head * kDim + d] += logits[j] / total * v[j * kDim + d];
  }
  return out;
}

void check_against_model(kvc_cache* cache, const PaperModel& model) {
  const test::LayerSnapshot shot = test::snapshot(cache, 0);
  REQUIRE(shot.slots == model.sinks + model.M + model.window);
  const std::vector<float> k = test::decode(shot.k, Dtype::F32), v = test::decode(shot.v, Dtype::F32);
  for (uint32_t head = 0; head < kKvHeads; ++head) {
    std::vector<double> model_k, model_v;
    std::vector<int32_t> model_positions;
    model.view(head, model_k, model_v, model_positions);
    for (uint32_t slot = 0; slot < shot.slots; ++slot) {
      INFO("head ", head, " slot ", slot, " (sinks ", model.sinks, ", segment ", model.M, ")");
      CHECK(shot.positions[size_t(head) * shot.slots + slot] == model_positions[slot]);
      const bool segment = slot >= model.sinks && slot < model.sinks + model.M;
      for (uint32_t d = 0; d < kDim; ++d) {
        const float got_k = k[(size_t(head) * shot.slots + slot) * kDim + d], got_v = v[(size_t(head) * shot.slots + slot) * kDim + d];
        if (!segment) {  // sinks and window: the tokens themselves
          CHECK(got_k == float(model_k[size_t(slot) * kDim + d]));
          CHECK(got_v == float(model_v[size_t(slot) * kDim + d]));
        } else {  // f32 states, f32 folds: ~1e-7 relative per step
          CHECK(got_k == doctest::Approx(model_k[size_t(slot) * kDim + d]).scale(1).epsilon(1e-5));
          CHECK(got_v == doctest::Approx(model_v[size_t(slot) * kDim + d]).scale(1).epsilon(1e-5));
        }
      }
    }
  }
}

// Streams a prompt in two chunks, ends it, then decodes (with one chunk of three tokens),
// checking the cache and every decode output against the model; then appends without
// attending (a token leaves the window while the one before it still waits in the spare slot
// for an attention to fold it), and reads the cache with a token waiting.
void run_stream(const kvc_faedkv_params& params, const std::vector<bool>& expected_chunks) {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  const kvc_cache_desc desc = faedkv_desc(&params);
  test::CachePtr cache = test::make_cache(context.get(), desc);
  PaperModel model{params.sinks, params.recent_window};
  model.tokens_k.resize(kKvHeads), model.tokens_v.resize(kKvHeads);
  auto step = [&](uint32_t n, bool check_output, bool attend = true) {
    std::vector<float> k = test::random_floats(size_t(n) * kKvHeads * kDim), v = test::random_floats(k.size());
    std::vector<float> q = test::random_floats(size_t(n) * kQHeads * kDim, -3, 3);
    REQUIRE(kvc_cache_append(cache.get(), 0, n, KVC_DTYPE_F32, k.data(), v.data()) == KVC_OK);
    if (!attend) return model.append(k, v, n);
    std::vector<float> out(q.size());
    REQUIRE(kvc_attend(cache.get(), 0, n, KVC_DTYPE_F32, q.data(), out.data(), nullptr) == KVC_OK);
    model.append(k, v, n);
    if (!check_output) return;
    const std::vector<float> newest_q(q.end() - kQHeads * kDim, q.end());
    const std::vector<double> expected = model_attention(model, newest_q);
    for (size_t i = 0; i < expected.size(); ++i)
      CHECK(out[out.size() - expected.size() + i] == doctest::Approx(expected[i]).scale(1).epsilon(1e-5));
  };
  step(30, false);
  step(17, false);
  REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
  model.end_prefill(params.chunks, expected_chunks);
  check_against_model(cache.get(), model);
  for (uint32_t n : {1u, 1u, 3u, 1u, 1u, 1u, 1u, 1u, 1u, 1u, 1u, 1u}) {  // the ring laps twice
    step(n, true);
    check_against_model(cache.get(), model);
  }
  for (uint32_t n : {1u, 2u, params.recent_window, 1u}) step(n, false, false);  // R: the most an append takes
  check_against_model(cache.get(), model);
  step(1, false, false);
  step(1, true);
  check_against_model(cache.get(), model);
}

kvc_faedkv_params small_params() {
  kvc_faedkv_params params = kvc_faedkv_params_default();
  params.sinks = 3;
  params.recent_window = 5;
  params.chunks = 6;
  params.retain_ratio = 0.34f;  // round(2.04) = 2 chunks
  return params;
}

}  // namespace

TEST_CASE("FAEDKV follows the paper: sinks and window exact, segment = pruned spectrum folded by eq. 9") {
  SUBCASE("the lowest frequencies by default: chunks 0 and C - 1") {
    run_stream(small_params(), {true, false, false, false, false, true});
  }
  SUBCASE("the ablation's importance picks the top round(r C) chunks") {
    kvc_faedkv_params params = small_params();
    const float importance[6] = {0.1f, 0.9f, 0.05f, 0.7f, 0.2f, 0.3f};
    params.chunk_importance = importance;
    run_stream(params, {false, true, false, true, false, false});
  }
  SUBCASE("a caller's table of chunks, not symmetric (its mirrors are kept with it)") {
    kvc_faedkv_params params = small_params();
    const uint8_t keep[6] = {0, 0, 1, 0, 0, 0};
    params.chunk_keep = keep;
    run_stream(params, {false, false, true, false, false, false});
  }
}

TEST_CASE("FAEDKV refuses bad parameters and misuse, changing nothing") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  kvc_cache* cache = nullptr;
  const auto refused = [&](const kvc_cache_desc& desc, kvc_status expected, const char* what) {
    INFO(what, ": ", kvc_context_last_error(context.get()));
    CHECK(kvc_cache_create(context.get(), &desc, &cache) == expected);
  };
  kvc_faedkv_params params = small_params();
  kvc_cache_desc desc = faedkv_desc(&params);
  desc.rope_style = KVC_ROPE_NEOX;
  refused(desc, KVC_ERROR_UNSUPPORTED, "libkvc's RoPE");
  for (auto [field, value] : {std::pair{&kvc_faedkv_params::recent_window, 0u}, {&kvc_faedkv_params::chunks, 0u},
                              {&kvc_faedkv_params::chunks, 5000u}, {&kvc_faedkv_params::sinks, kCapacity}}) {
    params = small_params();
    params.*field = value;
    refused(faedkv_desc(&params), KVC_ERROR_INVALID_ARGUMENT, "a field out of range");
  }
  for (float ratio : {0.0f, 1.5f, NAN}) {
    params = small_params();
    params.retain_ratio = ratio;
    refused(faedkv_desc(&params), KVC_ERROR_INVALID_ARGUMENT, "retain_ratio");
  }
  params = small_params();
  const uint8_t none[6] = {};
  params.chunk_keep = none;
  refused(faedkv_desc(&params), KVC_ERROR_INVALID_ARGUMENT, "a table keeping nothing");
  params = small_params();
  const float importance[6] = {0, 1, NAN, 0, 0, 0};
  params.chunk_importance = importance;
  refused(faedkv_desc(&params), KVC_ERROR_INVALID_ARGUMENT, "a NaN importance");

  params = small_params();
  test::CachePtr owned = test::make_cache(context.get(), faedkv_desc(&params));
  const auto feed = [&](uint32_t n) {
    std::vector<float> k = test::random_floats(size_t(n) * kKvHeads * kDim), v = test::random_floats(k.size());
    return kvc_cache_append(owned.get(), 0, n, KVC_DTYPE_F32, k.data(), v.data());
  };
  REQUIRE(feed(params.sinks + params.recent_window + params.chunks - 1) == KVC_OK);
  const test::LayerSnapshot before = test::snapshot(owned.get(), 0);
  CHECK(kvc_cache_end_prefill(owned.get()) == KVC_ERROR_BAD_STATE);  // a segment shorter than C
  CHECK(test::snapshot(owned.get(), 0) == before);
  REQUIRE(feed(1) == KVC_OK);
  REQUIRE(kvc_cache_end_prefill(owned.get()) == KVC_OK);
  CHECK(kvc_cache_end_prefill(owned.get()) == KVC_ERROR_BAD_STATE);
  {  // the prompt's queries cannot attend once its middle is a spectrum (it holds newer tokens than they)
    std::vector<float> q = test::random_floats(size_t(kQHeads) * kDim), out(q.size());
    CHECK(kvc_attend(owned.get(), 0, 1, KVC_DTYPE_F32, q.data(), out.data(), nullptr) == KVC_ERROR_BAD_STATE);
  }
  const test::LayerSnapshot after_prompt = test::snapshot(owned.get(), 0);
  CHECK(feed(params.recent_window + 1) == KVC_ERROR_CAPACITY);
  CHECK(test::snapshot(owned.get(), 0) == after_prompt);
  REQUIRE(feed(1) == KVC_OK);
  const test::LayerSnapshot appended = test::snapshot(owned.get(), 0);
  std::vector<float> q = test::random_floats(size_t(kQHeads) * kDim), out(q.size()), scores(1024);
  CHECK(kvc_attend(owned.get(), 0, 1, KVC_DTYPE_F32, q.data(), out.data(), scores.data()) == KVC_ERROR_UNSUPPORTED);
  CHECK(test::snapshot(owned.get(), 0) == appended);
  CHECK(kvc_attend(owned.get(), 0, 1, KVC_DTYPE_F32, q.data(), out.data(), nullptr) == KVC_OK);
}

TEST_CASE("FAEDKV holds its sinks, window and kept bins after the prompt, and the prompt again after reset") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  const kvc_faedkv_params params = small_params();
  test::CachePtr cache = test::make_cache(context.get(), faedkv_desc(&params));
  const uint32_t prompt = 47, M = prompt - params.sinks - params.recent_window;  // chunks 0, 5 of 39 bins: 0..6, 32..38
  std::vector<float> k = test::random_floats(size_t(prompt) * kKvHeads * kDim), v = test::random_floats(k.size());
  REQUIRE(kvc_cache_append(cache.get(), 0, prompt, KVC_DTYPE_F32, k.data(), v.data()) == KVC_OK);
  kvc_cache_stats stats{sizeof(kvc_cache_stats)};
  REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
  CHECK(stats.device_bytes_held == uint64_t(kCapacity) * stats.bytes_per_slot);
  REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
  REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
  const uint64_t bins = 8;  // 0..7: chunk 0's bins 0..5 and chunk 5's 32..38, whose mirrors are 1..7
  CHECK(M == 39);
  // The time-domain slots: sinks, window and the spare (where a token leaving the window waits
  // for the next attention to fold it).
  const uint64_t expected = (params.sinks + params.recent_window + 1) * stats.bytes_per_slot
                            + 2 * kKvHeads * bins * kDim * 8                            // K and V states, complex f32
                            + bins * 4 + M * 4 + kKvHeads * params.sinks * 4;           // bin table and map, sink indices
  CHECK(stats.device_bytes_held == expected);
  CHECK(stats.slots_held == params.sinks + params.recent_window + 1);
  REQUIRE(kvc_cache_reset(cache.get()) == KVC_OK);
  REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
  CHECK(stats.device_bytes_held == uint64_t(kCapacity) * stats.bytes_per_slot + kKvHeads * params.sinks * 4);
}

}  // namespace kvc

namespace kvc {

TEST_CASE("kvc_faedkv_ablate returns the layer with one chunk of its middle's spectrum zeroed (eq. 6)") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  kvc_cache_desc desc = faedkv_desc(nullptr);
  desc.policy = KVC_POLICY_FULL;
  test::CachePtr cache = test::make_cache(context.get(), desc);
  const uint32_t prompt = 40;
  std::vector<float> k = test::random_floats(size_t(prompt) * kKvHeads * kDim), v = test::random_floats(k.size());
  REQUIRE(kvc_cache_append(cache.get(), 0, prompt, KVC_DTYPE_F32, k.data(), v.data()) == KVC_OK);
  kvc_faedkv_params params = small_params();  // M = 40 - 3 - 5 = 32 bins in 6 chunks
  const uint32_t M = prompt - params.sinks - params.recent_window;
  for (uint32_t chunk : {0u, 2u, 5u}) {
    std::vector<float> ablated_k(k.size()), ablated_v(v.size());
    REQUIRE(kvc_faedkv_ablate(cache.get(), 0, &params, chunk, prompt, KVC_DTYPE_F32, ablated_k.data(), ablated_v.data()) == KVC_OK);
    std::set<uint32_t> pruned;
    for (uint32_t bin = chunk * M / params.chunks; bin < (chunk + 1) * M / params.chunks; ++bin) pruned.insert(bin), pruned.insert((M - bin) % M);
    for (auto [given, ablated] : {std::pair{&k, &ablated_k}, {&v, &ablated_v}})
      for (uint32_t head = 0; head < kKvHeads; ++head)
        for (uint32_t d = 0; d < kDim; ++d) {
          const auto token = [&](uint32_t t) { return double((*given)[(size_t(t) * kKvHeads + head) * kDim + d]); };
          std::vector<Complex> X(M);
          for (uint32_t bin = 0; bin < M; ++bin)
            if (!pruned.count(bin))
              for (uint32_t n = 0; n < M; ++n) X[bin] += token(params.sinks + n) * std::polar(1.0, -2 * M_PI * double(bin * n % M) / M);
          for (uint32_t slot = 0; slot < prompt; ++slot) {
            double expected = token(slot);
            if (slot >= params.sinks && slot < params.sinks + M) {
              Complex x = 0;
              for (uint32_t bin = 0; bin < M; ++bin) x += X[bin] * std::polar(1.0, 2 * M_PI * double(bin * (slot - params.sinks) % M) / M);
              expected = x.real() / M;
            }
            INFO("chunk ", chunk, " head ", head, " slot ", slot, " dim ", d);
            // kvc_cache_read's layout: [kv head][slot][dim].
            CHECK((*ablated)[(size_t(head) * prompt + slot) * kDim + d] == doctest::Approx(expected).scale(1).epsilon(1e-5));
          }
        }
  }
  std::vector<float> spare(k.size());
  CHECK(kvc_faedkv_ablate(cache.get(), 0, &params, params.chunks, prompt, KVC_DTYPE_F32, spare.data(), nullptr) == KVC_ERROR_OUT_OF_RANGE);
  CHECK(kvc_faedkv_ablate(cache.get(), 0, &params, 0, prompt - 1, KVC_DTYPE_F32, spare.data(), nullptr) == KVC_ERROR_BUFFER_TOO_SMALL);
  params.chunks = 33;  // S + R + C = 41 > 40 tokens held
  CHECK(kvc_faedkv_ablate(cache.get(), 0, &params, 0, prompt, KVC_DTYPE_F32, spare.data(), nullptr) == KVC_ERROR_BAD_STATE);
  // A FAEDKV cache past its prompt is refused, even where its stored slots (S + R and the spare)
  // are as many as it shows (S + M + R at M = 1).
  kvc_faedkv_params one_chunk = small_params();
  one_chunk.chunks = 1;
  test::CachePtr compressed = test::make_cache(context.get(), faedkv_desc(&one_chunk));
  const uint32_t shortest = one_chunk.sinks + one_chunk.recent_window + 1;
  REQUIRE(kvc_cache_append(compressed.get(), 0, shortest, KVC_DTYPE_F32, k.data(), v.data()) == KVC_OK);
  REQUIRE(kvc_cache_end_prefill(compressed.get()) == KVC_OK);
  CHECK(kvc_faedkv_ablate(compressed.get(), 0, &one_chunk, 0, prompt, KVC_DTYPE_F32, spare.data(), nullptr) == KVC_ERROR_BAD_STATE);
}

}  // namespace kvc
