// Spectral attention on Vulkan (bin products, inverse DFT, softmax, forward DFT, value sum)
// against the CPU's materialized segment, over odd, prime, power-of-two and tiny segments, GQA,
// chunks of queries and held slots in ring order, and with a held slot excluded whose token
// is folded into the bins first.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "ops/spectral_attention.h"
#include "support/test_support.h"

namespace kvc {

namespace {

struct Case {
  uint32_t q_heads, kv_heads, dim, queries, held, segment_length, num_bins;
  Dtype dtype;
};

// The Vulkan route's output and the CPU's over random queries, held slots and states, with the
// stored `bins` (distinct, <= M / 2) and, where `span` is set, the chirp-z transforms over it.
// With `fold`, a random held slot is excluded and its token folded into the states first: the
// states after the call are compared too.
void check_case(Backend& gpu, const Case& c, const std::vector<uint32_t>& bins, bool span, bool fold = false) {
  // Held slots in a shuffled order, the queries' tokens the newest positions.
  const int32_t first_query = 1000;
  std::vector<int32_t> slot_positions(c.held);
  std::iota(slot_positions.begin(), slot_positions.end(), first_query + int32_t(c.queries) - int32_t(c.held));
  std::shuffle(slot_positions.begin(), slot_positions.end(), test::rng());
  std::vector<int32_t> positions;
  for (uint32_t h = 0; h < c.kv_heads; ++h) positions.insert(positions.end(), slot_positions.begin(), slot_positions.end());
  std::vector<float> k = test::random_floats(size_t(c.kv_heads) * c.held * c.dim), v = test::random_floats(k.size());
  std::vector<float> q = test::random_floats(size_t(c.queries) * c.q_heads * c.dim, -3, 3);
  const std::vector<unsigned char> k_bytes = test::encode(k, c.dtype), v_bytes = test::encode(v, c.dtype), q_bytes = test::encode(q, c.dtype);
  // States scaled so the segment's rows are about as large as the held ones.
  const float state_scale = 1.0f / std::sqrt(float(c.num_bins));
  std::vector<float> key_states = test::random_floats(size_t(c.kv_heads) * c.num_bins * c.dim * 2, -state_scale, state_scale);
  std::vector<float> value_states = test::random_floats(key_states.size(), -state_scale, state_scale);
  const std::vector<uint32_t> map = ops::spectral_bin_map(bins, c.segment_length);
  ops::SpectralAttentionShape shape{c.q_heads, c.kv_heads, c.dim, c.queries, c.held, c.held, first_query,
                                    c.num_bins, c.segment_length, c.dtype};
  if (span) shape.span = ops::mirrored_bin_span(bins, c.segment_length);
  if (fold) {
    shape.excluded_slot = std::uniform_int_distribution<uint32_t>(0, c.held - 1)(test::rng());
    shape.fold_excluded = true;
    shape.folded = c.segment_length + 1 + std::uniform_int_distribution<uint32_t>(0, 3 * c.segment_length)(test::rng());
  }
  const size_t out_bytes = q_bytes.size(), states_bytes = key_states.size() * 4;
  std::vector<std::vector<float>> results, states;
  for (Backend* backend : {&test::cpu_backend(), &gpu}) {
    auto t = [&](const auto& data) { return test::make_tensor(*backend, data.data(), data.size() * sizeof(data[0])); };
    auto q_t = t(q_bytes), k_t = t(k_bytes), v_t = t(v_bytes), p_t = t(positions), bins_t = t(bins), map_t = t(map);
    auto ks_t = t(key_states), vs_t = t(value_states);
    auto out = test::make_poisoned(*backend, out_bytes);
    backend->begin();
    ops::spectral_attention(*backend, shape,
                            {view(*q_t), view(*k_t), view(*v_t), view(*p_t), view(*bins_t), view(*map_t), view(*ks_t), view(*vs_t), view(*out)});
    backend->submit();
    results.push_back(test::decode(test::read_tensor(*backend, *out, out_bytes), c.dtype));
    for (auto* tensor : {ks_t.get(), vs_t.get()}) states.push_back(test::decode(test::read_tensor(*backend, *tensor, states_bytes), Dtype::F32));
  }
  INFO("q heads ", c.q_heads, " kv heads ", c.kv_heads, " dim ", c.dim, " queries ", c.queries, " M ", c.segment_length,
       " bins ", c.num_bins, " from ", bins[0], " ", std::string(dtype_name(c.dtype)), span ? " over their span" : "",
       fold ? " folding slot " + std::to_string(shape.excluded_slot) + " as token " + std::to_string(shape.folded) : "");
  // f32: the logits come out of an f32 FFT of length M (error ~ log M ulp of the spectrum's
  // scale) and the value sum out of another; f16 adds the output's rounding (2^-11).
  CHECK(test::relative_max_error(results[1], results[0]) < (c.dtype == Dtype::F32 ? 5e-5 : 2e-3));
  // The fold's arithmetic is eq. 9's in f32 on both (the CPU's in double): a few ulp.
  for (int table = 0; table < 2; ++table) {
    CHECK(test::relative_max_error(states[2 + table], states[table]) < 1e-6);
    if (fold) continue;
    CHECK(states[table] == (table == 0 ? key_states : value_states));
    CHECK(states[2 + table] == (table == 0 ? key_states : value_states));
  }
}

// c.num_bins distinct random bins <= M / 2, sorted.
std::vector<uint32_t> random_bins(const Case& c) {
  std::vector<uint32_t> all(c.segment_length / 2 + 1);
  std::iota(all.begin(), all.end(), 0u);
  std::shuffle(all.begin(), all.end(), test::rng());
  std::vector<uint32_t> bins(all.begin(), all.begin() + c.num_bins);
  std::sort(bins.begin(), bins.end());
  return bins;
}

}  // namespace

TEST_CASE("spectral_attention on Vulkan equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // The fourth segment spans five of the softmax's 2048-logit chunks, the last one partial;
  // three query heads leave the last of the transforms' pairs of heads half empty. The rest are
  // lengths whose chirp-z transforms (ops/chirp_z_vulkan.h) are edge cases: 1 and 2 (a plan of
  // 2 points, with and without the chirp), 3, primes padded to 2.3 M and 2.5 M (97 -> 224, 4099 ->
  // 10240), 1009, a power of two (the plan's transform alone) and its neighbours (4095: P just
  // above 2 M; 4097).
  for (const Case& c : {Case{4, 2, 8, 1, 7, 37, 5, Dtype::F32}, Case{8, 2, 64, 3, 60, 1021, 130, Dtype::F16},
                        Case{2, 1, 128, 1, 11, 500, 251, Dtype::F32}, Case{6, 2, 16, 2, 9, 9001, 40, Dtype::F32},
                        Case{3, 1, 24, 2, 5, 301, 19, Dtype::F16}, Case{4, 2, 8, 1, 3, 1, 1, Dtype::F32},
                        Case{4, 2, 8, 2, 3, 2, 2, Dtype::F32}, Case{3, 1, 8, 1, 3, 3, 2, Dtype::F32},
                        Case{4, 1, 16, 1, 5, 97, 20, Dtype::F32}, Case{8, 2, 32, 1, 9, 1009, 100, Dtype::F16},
                        Case{4, 2, 16, 1, 7, 4095, 64, Dtype::F32}, Case{4, 2, 16, 1, 7, 4096, 64, Dtype::F32},
                        Case{2, 2, 16, 1, 7, 4097, 64, Dtype::F32}, Case{5, 1, 16, 1, 7, 4099, 300, Dtype::F32}}) {
    check_case(*gpu, c, random_bins(c), false);  // the third case keeps every bin
  }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("spectral_attention on Vulkan over the span of its bins equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // Runs of stored bins, so that the transforms form or take only the span the bins and their
  // mirrors fill: the lowest (around 0, FAEDKV's default chunks), one around M / 4 (a span
  // through the middle), the highest (up to M / 2: a span excluding 0), at odd, prime and
  // power-of-two-neighbouring lengths and a softmax of several chunks (9001); where P = M (the
  // power of two 64, and 48 = 3 * 16, 40 = 5 * 8 and 56 = 7 * 8 with bin 0 or M / 2 alone) the
  // plan's transform alone.
  for (const Case& c : {Case{4, 2, 8, 1, 7, 37, 5, Dtype::F32}, Case{8, 2, 64, 2, 60, 1021, 93, Dtype::F16},
                        Case{4, 2, 8, 1, 3, 48, 1, Dtype::F32}, Case{4, 2, 16, 1, 5, 64, 6, Dtype::F32},
                        Case{4, 1, 16, 1, 5, 97, 9, Dtype::F32}, Case{6, 2, 16, 2, 9, 9001, 400, Dtype::F32},
                        Case{4, 2, 16, 1, 7, 4097, 64, Dtype::F32}, Case{3, 1, 24, 1, 5, 4099, 300, Dtype::F16},
                        Case{4, 2, 8, 1, 3, 40, 1, Dtype::F32}, Case{4, 2, 8, 1, 3, 56, 1, Dtype::F32}}) {
    for (const uint32_t first : {0u, c.segment_length / 4, c.segment_length / 2 + 1 - c.num_bins}) {
      std::vector<uint32_t> bins(c.num_bins);
      std::iota(bins.begin(), bins.end(), first);
      check_case(*gpu, c, bins, true);
    }
  }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("spectral_attention on Vulkan folding an excluded slot's token equals the CPU reference") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // Groups of 1 to 12 query heads (above 8 the passes take the group in two blocks, both over
  // the states folded once), several queries (only the first folds), runs of bins
  // and random ones, odd head dims and segments of several softmax chunks, one with fewer held
  // slots than chunks and the largest head dim (the value sum's threads then hold 8 bins each).
  for (const Case& c : {Case{4, 2, 8, 1, 7, 37, 5, Dtype::F32}, Case{8, 2, 64, 3, 60, 1021, 130, Dtype::F16},
                        Case{12, 1, 24, 2, 9, 301, 40, Dtype::F32}, Case{10, 1, 40, 1, 5, 4099, 300, Dtype::F16},
                        Case{3, 3, 8, 1, 3, 2, 2, Dtype::F32}, Case{6, 2, 16, 2, 9, 9001, 400, Dtype::F32},
                        Case{4, 2, 256, 1, 3, 9001, 40, Dtype::F16}})
    for (const bool run : {false, true}) {
      std::vector<uint32_t> bins(c.num_bins);
      std::iota(bins.begin(), bins.end(), 0u);
      check_case(*gpu, c, run ? bins : random_bins(c), run, true);
    }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
