#include "support/api_helpers.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "support/test_support.h"

namespace kvc::test {

ContextPtr make_context(kvc_backend backend, uint32_t flags) {
  kvc_context_desc desc = kvc_context_desc_default();
  desc.backend = backend;
  const ValidationMode validation = validation_mode();
  desc.flags = flags | (backend == KVC_BACKEND_VULKAN && validation != ValidationMode::off ? KVC_CONTEXT_VALIDATION : 0u);
  kvc_context* context = nullptr;
  kvc_status status = kvc_context_create(&desc, &context);
  if (status == KVC_ERROR_UNSUPPORTED && validation == ValidationMode::when_installed) {  // no validation layer
    desc.flags = flags;
    status = kvc_context_create(&desc, &context);
  }
  return ContextPtr(status == KVC_OK ? context : nullptr);
}

CachePtr make_cache(kvc_context* context, const kvc_cache_desc& desc) {
  kvc_cache* cache = nullptr;
  const kvc_status status = kvc_cache_create(context, &desc, &cache);
  INFO(kvc_status_name(status), ": ", kvc_context_last_error(context));
  REQUIRE(status == KVC_OK);
  return CachePtr(cache);
}

double cache_scores_tolerance(kvc_context* context, const kvc_cache_desc& desc, uint32_t n_queries) {
  kvc_context_info info{sizeof(kvc_context_info)};
  REQUIRE(kvc_context_info_get(context, &info) == KVC_OK);
  // The shapes ops::attention_on_cooperative_matrices takes (its RoPE offset alignment aside).
  const bool cooperative = info.matrix_path == KVC_MATRIX_PATH_COOPERATIVE && desc.dtype == KVC_DTYPE_F16 && n_queries > 1 &&
                           desc.head_dim % 16 == 0 && desc.head_dim <= 128;
  // Keys stored rotated are rounded to f16 after rotation by each backend apart: the same
  // rounding of rotated keys the cooperative path makes.
  const bool rotated_keys_rounded = stores_rotated_keys(desc) && desc.dtype == KVC_DTYPE_F16;
  return scores_tolerance(cooperative || rotated_keys_rounded, desc.rope_style != KVC_ROPE_NONE);
}

kvc_cache_desc small_cache_desc(kvc_dtype dtype, uint32_t capacity) {
  kvc_cache_desc desc = kvc_cache_desc_default();
  desc.num_layers = 2;
  desc.num_q_heads = 8;
  desc.num_kv_heads = 2;
  desc.head_dim = 64;
  desc.dtype = dtype;
  desc.capacity = capacity;
  desc.rope_style = KVC_ROPE_NEOX;
  return desc;
}

StepInputs random_step_inputs(const kvc_cache_desc& desc, uint32_t n_tokens) {
  const Dtype storage = static_cast<Dtype>(desc.dtype);
  std::vector<float> k = random_floats(size_t(n_tokens) * desc.num_kv_heads * desc.head_dim),
                     v = random_floats(k.size()), q = random_floats(size_t(n_tokens) * desc.num_q_heads * desc.head_dim, -3, 3);
  return {encode(k, storage), encode(v, storage), encode(q, storage)};
}

LayerSnapshot snapshot(kvc_cache* cache, uint32_t layer) {
  LayerSnapshot shot;
  REQUIRE(kvc_cache_layer_slots(cache, layer, &shot.slots) == KVC_OK);
  kvc_cache_stats stats{sizeof(kvc_cache_stats)};
  REQUIRE(kvc_cache_stats_get(cache, &stats) == KVC_OK);
  const size_t row_bytes = stats.bytes_per_slot;  // an upper bound per slot, enough room
  shot.k.resize(shot.slots * row_bytes + 1);
  shot.v.resize(shot.slots * row_bytes + 1);
  shot.positions.resize(shot.slots * 64 + 1);
  // The dtype is whatever the cache stores: try both, one succeeds.
  if (kvc_cache_read(cache, layer, shot.slots, KVC_DTYPE_F32, shot.k.data(), shot.v.data(), shot.positions.data()) != KVC_OK)
    REQUIRE(kvc_cache_read(cache, layer, shot.slots, KVC_DTYPE_F16, shot.k.data(), shot.v.data(), shot.positions.data()) == KVC_OK);
  return shot;
}

bool stores_rotated_keys(const kvc_cache_desc& desc) {
  return desc.policy == KVC_POLICY_FULL && desc.rope_style != KVC_ROPE_NONE;
}

void check_same_layer(const LayerSnapshot& gpu, const LayerSnapshot& cpu, const kvc_cache_desc& desc) {
  if (!stores_rotated_keys(desc)) {
    CHECK(gpu == cpu);
    return;
  }
  REQUIRE(gpu.slots == cpu.slots);
  CHECK(gpu.positions == cpu.positions);
  CHECK(gpu.v == cpu.v);
  const Dtype storage = static_cast<Dtype>(desc.dtype);
  const size_t held = size_t(cpu.slots) * desc.num_kv_heads * desc.head_dim * dtype_size(storage);
  const auto keys = [&](const LayerSnapshot& shot) { return decode(std::vector<unsigned char>(shot.k.begin(), shot.k.begin() + held), storage); };
  const std::vector<float> gpu_keys = keys(gpu), cpu_keys = keys(cpu);
  // Each backend rotates in its own arithmetic (a few 1e-8 of the pair's magnitude apart), which
  // in f16 may round a stored element one ulp apart (2^-10 of the magnitude at most); rotated
  // back, that error spreads over the pair (sqrt 2 of it), and each side rounds the element
  // again (2^-11 of it, each).
  const uint32_t dim = desc.head_dim, rotary = desc.rope_dims ? desc.rope_dims : dim, half = rotary / 2;
  double worst = 0;
  for (size_t i = 0; i < cpu_keys.size(); ++i) {
    const uint32_t d = uint32_t(i % dim);
    const uint32_t partner = d >= rotary ? d : desc.rope_style == KVC_ROPE_NEOX ? (d < half ? d + half : d - half) : d ^ 1u;
    const double magnitude = std::hypot(cpu_keys[i], cpu_keys[i - d + partner]);
    const double bound = desc.dtype == KVC_DTYPE_F16 ? 0x1p-10 * (std::sqrt(2.0) * magnitude + std::fabs(cpu_keys[i])) : 1e-6 * magnitude;
    worst = std::max(worst, std::fabs(gpu_keys[i] - cpu_keys[i]) - bound);
  }
  CHECK(worst <= 0);}

void expect_refused(kvc_context* context, kvc_cache* cache, kvc_status status, const std::function<kvc_status()>& call,
                    const std::string& message_part) {
  std::vector<LayerSnapshot> before;
  uint32_t slots = 0;
  for (uint32_t layer = 0; kvc_cache_layer_slots(cache, layer, &slots) == KVC_OK; ++layer) before.push_back(snapshot(cache, layer));
  kvc_cache_stats stats_before{sizeof(kvc_cache_stats)};
  REQUIRE(kvc_cache_stats_get(cache, &stats_before) == KVC_OK);
  const kvc_status got = call();
  const std::string message = kvc_context_last_error(context);
  INFO("status ", kvc_status_name(got), ": ", message);
  CHECK(got == status);
  CHECK(!message.empty());
  CHECK(message.find(message_part) != std::string::npos);
  for (uint32_t layer = 0; layer < before.size(); ++layer) CHECK(snapshot(cache, layer) == before[layer]);
  kvc_cache_stats stats_after{sizeof(kvc_cache_stats)};
  REQUIRE(kvc_cache_stats_get(cache, &stats_after) == KVC_OK);
  CHECK(stats_after.tokens_seen == stats_before.tokens_seen);
  CHECK(stats_after.slots_held == stats_before.slots_held);
}

void check_same_chunk(kvc_cache* gpu, kvc_cache* cpu, const kvc_cache_desc& desc, uint32_t layer, uint32_t n,
                      const BackendTolerances& tolerances, bool attend) {
  const Dtype storage = static_cast<Dtype>(desc.dtype);
  const StepInputs in = random_step_inputs(desc, n);
  std::vector<std::vector<unsigned char>> outs;
  for (kvc_cache* cache : {gpu, cpu}) {
    REQUIRE(kvc_cache_append(cache, layer, n, desc.dtype, in.k.data(), in.v.data()) == KVC_OK);
    if (!attend) continue;
    outs.emplace_back(in.q.size());
    REQUIRE(kvc_attend(cache, layer, n, desc.dtype, in.q.data(), outs.back().data(), nullptr) == KVC_OK);
  }
  const LayerSnapshot on_gpu = snapshot(gpu, layer), on_cpu = snapshot(cpu, layer);
  INFO("chunk of ", n, " layer ", layer, " ", std::string(dtype_name(storage)), " slots ", on_cpu.slots, attend ? "" : ", not attended");
  if (attend) CHECK(relative_max_error(decode(outs[0], storage), decode(outs[1], storage)) < tolerances.output);
  REQUIRE(on_gpu.slots == on_cpu.slots);
  CHECK(on_gpu.positions == on_cpu.positions);
  const size_t held = size_t(on_cpu.slots) * desc.num_kv_heads * desc.head_dim * dtype_size(storage);
  for (auto [a, b] : {std::pair{&on_gpu.k, &on_cpu.k}, {&on_gpu.v, &on_cpu.v}}) {
    const std::vector<unsigned char> gpu_bytes(a->begin(), a->begin() + held), cpu_bytes(b->begin(), b->begin() + held);
    CHECK(relative_max_error(decode(gpu_bytes, storage), decode(cpu_bytes, storage)) < tolerances.kv);
  }
}

}  // namespace kvc::test
