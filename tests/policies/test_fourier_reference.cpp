// The FOURIER policy on the CPU backend through the C API: parameters refused with a message
// naming the field, and a stream (a prompt, kvc_cache_end_prefill, decode steps) checked
// against the paper at every step: the sinks and the local window stay bit-identical, the
// middle's uncompressed dims keep every token, its compressed dims read back as appendix D's
// standardized F^T C of eq. 4 (by formula, over every token the middle has taken: eq. 6 is eq. 4
// one column longer), sec. 3.4 compresses the dims that reconstruct best, attention equals
// softmax attention over that rebuilt cache, refused calls change nothing, and a reset gives
// the prompt's storage back.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "common/dtype.h"
#include "support/api_helpers.h"
#include "support/formulas.h"
#include "support/test_support.h"

namespace kvc {
namespace {

kvc_cache_desc fourier_desc(kvc_dtype dtype, uint32_t capacity, const kvc_fourier_params* params) {
  kvc_cache_desc desc = test::small_cache_desc(dtype, capacity);
  desc.rope_style = KVC_ROPE_NONE;  // FOURIER compresses keys as the model stores them
  desc.policy = KVC_POLICY_FOURIER;
  desc.policy_params = params;
  return desc;
}

// Appendix D's affine map of one dim, fitted on x and its F^T C reconstruction r.
struct Affine {
  long double scale, offset;
};
Affine fit_by_formula(const std::vector<long double>& x, const std::vector<long double>& r) {
  const long double n = x.size();
  const long double mean_x = std::accumulate(x.begin(), x.end(), 0.0L) / n, mean_r = std::accumulate(r.begin(), r.end(), 0.0L) / n;
  long double var_x = 0, var_r = 0;
  for (size_t i = 0; i < x.size(); ++i) var_x += (x[i] - mean_x) * (x[i] - mean_x), var_r += (r[i] - mean_r) * (r[i] - mean_r);
  const long double scale = var_r > 0 ? std::sqrt(var_x / var_r) : 0;
  return {scale, mean_x - scale * mean_r};
}

// What a compressed layer must read back as, built from every token it took (host copies).
struct ExpectedLayer {
  std::vector<std::vector<uint32_t>> compressed_dims;  // per kv head, for K and V: [2][heads]
  std::vector<std::vector<Affine>> affine;              // [2][heads * head_dim], fitted at compression
};

}  // namespace

TEST_CASE("FOURIER refuses bad parameters at cache creation, naming the field") {
  test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU);
  const float bad_ratios[2] = {0.5f, 1.0f};
  std::vector<uint8_t> uneven(2 * 2 * 64, 0), none(2 * 2 * 64, 0);
  for (size_t i = 0; i < uneven.size(); ++i) uneven[i] = (i % 64) < ((i / 64) % 2 ? 10u : 11u);
  struct BadCase {
    kvc_fourier_params params;
    uint32_t capacity;
    bool rope;
    kvc_status status;
    const char* named;
  };
  kvc_fourier_params base = kvc_fourier_params_default();
  base.sinks = 4, base.local_window = 16, base.num_states = 8;
  auto with = [&](auto change) {
    kvc_fourier_params params = base;
    change(params);
    return params;
  };
  const BadCase cases[] = {
      {with([](kvc_fourier_params& p) { p.local_window = 60; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "local_window"},
      {with([](kvc_fourier_params& p) { p.local_window = 0; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "local_window"},
      {with([](kvc_fourier_params& p) { p.num_states = 0; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "num_states"},
      {with([](kvc_fourier_params& p) { p.num_states = 33; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "window_length"},
      {with([](kvc_fourier_params& p) { p.window_length = 40; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "window_length"},
      {with([](kvc_fourier_params& p) { p.window_length = (1u << 24) + 1; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "window_length"},
      {with([&](kvc_fourier_params& p) { p.key_ratios = bad_ratios; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "key_ratios[1]"},
      {with([&](kvc_fourier_params& p) { p.value_ratios = bad_ratios; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "value_ratios[1]"},
      {with([&](kvc_fourier_params& p) { p.key_dims = uneven.data(); }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "key_dims"},
      {with([&](kvc_fourier_params& p) { p.value_dims = none.data(); }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "value_dims"},
      {with([](kvc_fourier_params& p) { p.struct_size = 4; }), 64, false, KVC_ERROR_INVALID_ARGUMENT, "struct_size"},
      {base, 64, true, KVC_ERROR_UNSUPPORTED, "RoPE"},
  };
  for (const BadCase& bad : cases) {
    kvc_cache_desc desc = fourier_desc(KVC_DTYPE_F32, bad.capacity, &bad.params);
    if (bad.rope) desc.rope_style = KVC_ROPE_NEOX;
    kvc_cache* cache = nullptr;
    INFO("expects ", std::string(bad.named), "; got: ", std::string(kvc_context_last_error(cpu.get())));
    CHECK(kvc_cache_create(cpu.get(), &desc, &cache) == bad.status);
    CHECK(cache == nullptr);
    CHECK(std::string(kvc_context_last_error(cpu.get())).find(bad.named) != std::string::npos);
  }
  const kvc_fourier_params defaults = kvc_fourier_params_default();
  CHECK(defaults.sinks == 4);
  CHECK(defaults.local_window == 1024);
  CHECK(defaults.num_states == 512);
  CHECK(defaults.window_length == 0);
  CHECK(defaults.key_ratios == nullptr);
  CHECK(defaults.key_dims == nullptr);
}

TEST_CASE("FOURIER on the CPU follows the paper step by step") {
  const uint32_t capacity = 48, sinks = 3, local = 7, states = 4, prompt = 30, decode_steps = 6;
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16}) {
    const Dtype storage = static_cast<Dtype>(dtype);
    test::ContextPtr cpu = test::make_context(KVC_BACKEND_CPU);
    kvc_fourier_params params = kvc_fourier_params_default();
    params.sinks = sinks, params.local_window = local, params.num_states = states;  // T = capacity
    const kvc_cache_desc desc = fourier_desc(dtype, capacity, &params);
    test::CachePtr cache = test::make_cache(cpu.get(), desc);
    const uint32_t heads = desc.num_kv_heads, dim = desc.head_dim;
    // Both layers are among the last 8: the pyramid compresses 0.5 of K's dims and 0.7 of V's.
    const uint32_t compressed[2] = {32, 45};  // round(0.5 * 64), round(0.7 * 64)
    std::vector<std::vector<float>> tokens_k(desc.num_layers), tokens_v(desc.num_layers);  // [token][kv][d], rounded
    std::vector<ExpectedLayer> expected_layers(desc.num_layers);

    auto feed = [&](uint32_t layer, uint32_t n, test::StepInputs& in, std::vector<unsigned char>& out) {
      REQUIRE(kvc_cache_append(cache.get(), layer, n, dtype, in.k.data(), in.v.data()) == KVC_OK);
      const std::vector<float> k = test::decode(in.k, storage), v = test::decode(in.v, storage);
      tokens_k[layer].insert(tokens_k[layer].end(), k.begin(), k.end());
      tokens_v[layer].insert(tokens_v[layer].end(), v.begin(), v.end());
      out.assign(in.q.size(), 0xff);
      REQUIRE(kvc_attend(cache.get(), layer, n, dtype, in.q.data(), out.data(), nullptr) == KVC_OK);
    };
    for (uint32_t chunk : {13u, 17u})
      for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
        test::StepInputs in = test::random_step_inputs(desc, chunk);
        std::vector<unsigned char> out;
        feed(layer, chunk, in, out);
      }
    const uint64_t bytes_before = [&] {
      kvc_cache_stats stats{sizeof(kvc_cache_stats)};
      REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
      return stats.device_bytes_held;
    }();
    REQUIRE(kvc_cache_end_prefill(cache.get()) == KVC_OK);
    kvc_cache_stats stats{sizeof(kvc_cache_stats)};
    REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
    CHECK(stats.compressions == desc.num_layers);
    CHECK(stats.device_bytes_held < bytes_before);  // the prompt's capacity-slot storage is gone

    // Sec. 3.4 by formula, on the prompt's middle: per kv head, the dims whose standardized
    // reconstruction errs least; appendix D's affine maps fitted there.
    const uint32_t first_middle = sinks, compressed_middle = prompt - sinks - local;
    auto sequence = [&](const std::vector<float>& tokens, uint32_t head, uint32_t d, uint32_t length) {
      std::vector<long double> x(length);
      for (uint32_t t = 0; t < length; ++t) x[t] = tokens[((size_t(first_middle) + t) * heads + head) * dim + d];
      return x;
    };
    for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
      ExpectedLayer& expected = expected_layers[layer];
      expected.compressed_dims.assign(2, {});
      expected.affine.assign(2, std::vector<Affine>(size_t(heads) * dim));
      for (int part = 0; part < 2; ++part) {
        const std::vector<float>& tokens = part == 0 ? tokens_k[layer] : tokens_v[layer];
        for (uint32_t head = 0; head < heads; ++head) {
          std::vector<long double> error(dim);
          for (uint32_t d = 0; d < dim; ++d) {
            const std::vector<long double> x = sequence(tokens, head, d, compressed_middle);
            const std::vector<long double> r = test::fourier_inverse_by_formula(
                test::fourier_coefficients_by_formula(x, states, 0, capacity), compressed_middle, 0, capacity);
            const Affine affine = fit_by_formula(x, r);
            expected.affine[part][size_t(head) * dim + d] = affine;
            for (uint32_t t = 0; t < compressed_middle; ++t)
              error[d] += (affine.scale * r[t] + affine.offset - x[t]) * (affine.scale * r[t] + affine.offset - x[t]);
          }
          std::vector<uint32_t> order(dim);
          std::iota(order.begin(), order.end(), 0u);
          std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return error[a] < error[b]; });
          order.resize(compressed[part]);
          std::sort(order.begin(), order.end());
          expected.compressed_dims[part].insert(expected.compressed_dims[part].end(), order.begin(), order.end());
        }
      }
    }

    for (uint32_t step = 0; step <= decode_steps; ++step)
      for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
        std::vector<unsigned char> out;
        test::StepInputs in;
        if (step > 0) {
          in = test::random_step_inputs(desc, 1);
          const test::LayerSnapshot before = test::snapshot(cache.get(), layer);
          // Refused: more than the window at once, scores from the compressed layer.
          const test::StepInputs too_many = test::random_step_inputs(desc, local + 1);
          CHECK(kvc_cache_append(cache.get(), layer, local + 1, dtype, too_many.k.data(), too_many.v.data()) == KVC_ERROR_CAPACITY);
          CHECK(test::snapshot(cache.get(), layer) == before);
          REQUIRE(kvc_cache_append(cache.get(), layer, 1, dtype, in.k.data(), in.v.data()) == KVC_OK);
          const std::vector<float> k = test::decode(in.k, storage), v = test::decode(in.v, storage);
          tokens_k[layer].insert(tokens_k[layer].end(), k.begin(), k.end());
          tokens_v[layer].insert(tokens_v[layer].end(), v.begin(), v.end());
          const test::LayerSnapshot appended = test::snapshot(cache.get(), layer);
          std::vector<float> scores(size_t(heads) * capacity, NAN);
          out.assign(in.q.size(), 0xff);
          CHECK(kvc_attend(cache.get(), layer, 1, dtype, in.q.data(), out.data(), scores.data()) == KVC_ERROR_UNSUPPORTED);
          CHECK(std::string(kvc_context_last_error(cpu.get())).find("scores") != std::string::npos);
          CHECK(test::snapshot(cache.get(), layer) == appended);
          REQUIRE(kvc_attend(cache.get(), layer, 1, dtype, in.q.data(), out.data(), nullptr) == KVC_OK);
        }
        const uint32_t seen = uint32_t(tokens_k[layer].size() / (size_t(heads) * dim));
        const uint32_t middle = seen - sinks - local;
        const test::LayerSnapshot read = test::snapshot(cache.get(), layer);
        INFO(std::string(dtype_name(storage)), " layer ", layer, " decode step ", step, " middle ", middle);
        REQUIRE(read.slots == seen);

        // The cache attention must see: sinks and window as appended, the middle's kept dims as
        // appended, its compressed dims rebuilt by formula ([kv][seen][d], long double).
        std::vector<float> keys(size_t(heads) * seen * dim), values(keys.size());
        std::vector<float> rebuilt_read, rebuilt_expected;
        for (int part = 0; part < 2; ++part) {
          const std::vector<float>& tokens = part == 0 ? tokens_k[layer] : tokens_v[layer];
          const std::vector<float> got = test::decode(part == 0 ? read.k : read.v, storage);
          std::vector<float>& rows = part == 0 ? keys : values;
          for (uint32_t head = 0; head < heads; ++head) {
            const auto first = expected_layers[layer].compressed_dims[part].begin() + size_t(head) * compressed[part];
            const std::vector<uint32_t> head_compressed(first, first + compressed[part]);
            for (uint32_t d = 0; d < dim; ++d) {
              const bool is_compressed = std::binary_search(head_compressed.begin(), head_compressed.end(), d);
              std::vector<long double> rebuilt;
              if (is_compressed) {
                const Affine affine = expected_layers[layer].affine[part][size_t(head) * dim + d];
                rebuilt = test::fourier_inverse_by_formula(
                    test::fourier_coefficients_by_formula(sequence(tokens, head, d, middle), states, 0, capacity), middle, 0, capacity);
                for (long double& value : rebuilt) value = affine.scale * value + affine.offset;
              }
              for (uint32_t slot = 0; slot < seen; ++slot) {
                const size_t at = (size_t(head) * seen + slot) * dim + d;
                const float appended = tokens[(size_t(slot) * heads + head) * dim + d];
                const bool in_middle = slot >= sinks && slot < sinks + middle;
                if (in_middle && is_compressed) {
                  rows[at] = static_cast<float>(rebuilt[slot - sinks]);
                  rebuilt_expected.push_back(rows[at]);
                  rebuilt_read.push_back(got[at]);
                } else {
                  rows[at] = appended;
                  CHECK(got[at] == appended);
                }
              }
            }
          }
        }
        // f32: the policy's coefficients and affine maps are f32, its sums double: 1e-5 of the
        // scale. f16: the read-back is rounded to f16 (2^-11 relative).
        CHECK(test::relative_max_error(rebuilt_read, rebuilt_expected) < (dtype == KVC_DTYPE_F32 ? 1e-5 : 1e-3));
        for (uint32_t head = 0; head < heads; ++head)
          for (uint32_t slot = 0; slot < seen; ++slot) CHECK(read.positions[size_t(head) * seen + slot] == int32_t(slot));
        if (step == 0) continue;

        // Attention over that cache, by formula (the query is the newest token: it sees all).
        std::vector<float> q = test::decode(in.q, storage);
        const test::DirectAttention direct =
            test::attention_by_formula(q, keys, values, std::vector<int32_t>(size_t(heads) * seen, 0), desc.num_q_heads, heads, dim, 1,
                                       seen, ops::RopeParams{});
        const std::vector<float> expected(direct.out.begin(), direct.out.end());
        // As above for the rebuilt dims; f16 also rounds the output (2^-11 relative each).
        CHECK(test::relative_max_error(test::decode(out, storage), expected) < (dtype == KVC_DTYPE_F32 ? 1e-5 : 2e-3));
      }
    REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
    CHECK(stats.compressions == desc.num_layers);
    CHECK(stats.slots_held == uint64_t(desc.num_layers) * (sinks + local));
    // A reset forgets the middles: the storage is the prompt's again, and so are the bytes.
    REQUIRE(kvc_cache_reset(cache.get()) == KVC_OK);
    REQUIRE(kvc_cache_stats_get(cache.get(), &stats) == KVC_OK);
    CHECK(stats.slots_held == 0);
    CHECK(stats.device_bytes_held == bytes_before);
  }
}

}  // namespace kvc
