// kvc-bench rows for FourierAttention (issue 12) in the paper's setting (sec. 4.1: 4 initial and
// 1024 local tokens, N = 512, the inverted pyramid) at L = 32K, 32 layers, 32 q / 8 kv heads,
// d = 128, f16: the compression of a prompt's middle (every layer's K and V), and a decode step
// (every layer's eq. 6 fold of the token leaving the window and its attention) beside a FULL
// decode step over the same L (no RoPE in either: FOURIER takes rotated keys).
#include <algorithm>
#include <string>

#include "bench_rows.h"
#include "cache/cache_config.h"
#include "ops/attention.h"
#include "ops/fourier_attention.h"
#include "ops/fourier_fold.h"
#include "policies/fourier.h"

namespace kvc::bench {
namespace {

constexpr uint32_t kQHeads = 32, kKvHeads = 8, kHeadDim = 128, kSinks = 4;

struct FourierSetting {
  uint32_t layers, length, states, local;
  std::string shape() const {
    return "layers=" + std::to_string(layers) + " qh=32 kvh=8 d=128 L=" + std::to_string(length) + " N=" + std::to_string(states) +
           " local=" + std::to_string(local);
  }
  uint32_t middle() const { return length - kSinks - local; }
};

std::unique_ptr<Tensor> upload_table(Backend& backend, const std::vector<uint32_t>& values) {
  auto tensor = std::make_unique<Tensor>(backend, values.size() * 4);
  backend.begin();
  backend.upload(values.data(), values.size() * 4, *tensor, 0);
  backend.submit();
  return tensor;
}

kvc_fourier_params params_of(const FourierSetting& setting) {
  kvc_fourier_params params = kvc_fourier_params_default();
  params.local_window = setting.local;
  params.num_states = setting.states;
  return params;
}

// `params` must outlive the policy's creation only.
CacheConfig fourier_config(const FourierSetting& setting, const kvc_fourier_params& params) {
  CacheConfig config;
  config.num_layers = setting.layers;
  config.num_q_heads = kQHeads;
  config.num_kv_heads = kKvHeads;
  config.head_dim = kHeadDim;
  config.dtype = Dtype::F16;
  config.capacity = setting.length;
  config.policy = KVC_POLICY_FOURIER;
  config.policy_params = &params;
  return config;
}

void add_compress_row(Backend& backend, const Timing& timing, const FourierSetting& setting, Report& report) {
  const kvc_fourier_params params = params_of(setting);
  std::unique_ptr<Policy> policy = make_fourier_policy(fourier_config(setting, params));
  auto& fourier = static_cast<FourierPolicy&>(*policy);
  fourier.allocate_device_state(backend);
  // The prompt's K and V; the same tensors stand for every layer's.
  const size_t rows_bytes = size_t(kKvHeads) * setting.length * kHeadDim * 2;
  auto k = make_random(backend, rows_bytes, Dtype::F16), v = make_random(backend, rows_bytes, Dtype::F16);
  Row row;
  row.name = "fourier_compress";
  row.shape = setting.shape();
  row.dtype = "f16";
  row.median_us = median_us(backend, timing, [&] {
    for (uint32_t layer = 0; layer < setting.layers; ++layer) {
      fourier.compress_middle(backend, layer, true, *k, setting.length, setting.middle());
      fourier.compress_middle(backend, layer, false, *v, setting.length, setting.middle());
    }
  });
  // The middle's K and V are read (twice: projection and fit) and packed once.
  row.bytes = double(setting.layers) * 2 * 2 * kKvHeads * double(setting.middle()) * kHeadDim * 2;
  record(report, row);
}

// One layer's compressed state with random contents (the timings depend on sizes only).
struct FourierLayerState {
  uint32_t key_compressed, value_compressed;
  std::unique_ptr<Tensor> key_dims, value_dims, key_coefficients, value_coefficients, key_affine, value_affine, key_packed, value_packed;
};

void add_decode_rows(Backend& backend, const Timing& timing, const RowOptions& options, const FourierSetting& setting, Report& report) {
  // The middle's runs hold one more token (the fold's), rounded up to 8 as the policy's are.
  const uint32_t full_slots = kSinks + setting.local, middle_capacity = (setting.middle() + 1 + 7) / 8 * 8;
  const size_t full_bytes = size_t(kKvHeads) * full_slots * kHeadDim * 2;
  auto k = make_random(backend, full_bytes, Dtype::F16), v = make_random(backend, full_bytes, Dtype::F16);
  auto q = make_random(backend, size_t(kQHeads) * kHeadDim * 2, Dtype::F16);
  auto out = std::make_unique<Tensor>(backend, size_t(kQHeads) * kHeadDim * 2);
  std::vector<uint32_t> identity(size_t(kKvHeads) * kHeadDim);
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = uint32_t(i % kHeadDim);
  auto dims = upload_table(backend, identity);

  // The pyramid's counts per layer, as the policy sets them; layers of equal counts share state.
  const std::unique_ptr<Policy> policy = make_fourier_policy(fourier_config(setting, params_of(setting)));
  const auto& fourier = static_cast<const FourierPolicy&>(*policy);
  std::vector<FourierLayerState> states;
  std::vector<size_t> state_of_layer;
  for (uint32_t layer = 0; layer < setting.layers; ++layer) {
    const uint32_t key_compressed = fourier.compressed_dims(layer, true), value_compressed = fourier.compressed_dims(layer, false);
    size_t index = 0;
    while (index < states.size() && (states[index].key_compressed != key_compressed || states[index].value_compressed != value_compressed))
      ++index;
    if (index == states.size()) {
      FourierLayerState state{key_compressed, value_compressed};
      for (auto [compressed, coefficients, affine, packed] :
           {std::tuple{key_compressed, &state.key_coefficients, &state.key_affine, &state.key_packed},
            std::tuple{value_compressed, &state.value_coefficients, &state.value_affine, &state.value_packed}}) {
        *coefficients = make_random(backend, size_t(kKvHeads) * 2 * setting.states * compressed * 4, Dtype::F32);
        *affine = make_random(backend, size_t(kKvHeads) * 2 * compressed * 4, Dtype::F32);
        *packed = make_random(backend, size_t(kKvHeads) * middle_capacity * (kHeadDim - compressed) * 2, Dtype::F16);
      }
      states.push_back(std::move(state));
    }
    state_of_layer.push_back(index);
  }

  if (options.wants("fourier_decode_step")) {
    ops::FourierAttentionShape prepare;
    prepare.num_q_heads = kQHeads;
    prepare.window_length = setting.length;
    ops::fourier_attention_prepare(backend, prepare);
    Row row;
    row.name = "fourier_decode_step";
    row.shape = setting.shape();
    row.dtype = "f16";
    double bytes = 0;
    row.median_us = median_us(backend, timing, [&] {
      for (uint32_t layer = 0; layer < setting.layers; ++layer) {
        const FourierLayerState& state = states[state_of_layer[layer]];
        // Eq. 6 for the window's oldest token (slot kSinks) as middle token M, then attention.
        ops::fourier_fold(backend,
                          {kKvHeads, kHeadDim, setting.states, setting.length, state.key_compressed, state.value_compressed,
                           full_slots, kSinks, 1, setting.middle(), middle_capacity, Dtype::F16},
                          {view(*k), view(*v), view(*dims), view(*dims), view(*state.key_coefficients),
                           view(*state.value_coefficients), view(*state.key_packed), view(*state.value_packed)});
        const ops::FourierAttentionShape shape{kQHeads,        kKvHeads,      kHeadDim,        full_slots,
                                               full_slots,     setting.middle() + 1, middle_capacity, setting.states,
                                               setting.length, state.key_compressed, state.value_compressed, Dtype::F16};
        ops::fourier_attention(backend, shape,
                               {view(*q), view(*k), view(*v), view(*state.key_packed),
                                view(*state.value_packed), view(*dims), view(*dims), view(*state.key_coefficients),
                                view(*state.value_coefficients), view(*state.key_affine), view(*state.value_affine), view(*out)});
      }
    });
    // What must be read once: the full rows, the packed dims and the coefficients.
    for (uint32_t layer = 0; layer < setting.layers; ++layer) {
      const FourierLayerState& state = states[state_of_layer[layer]];
      bytes += double(full_bytes) * 2 + double(kKvHeads) * setting.middle() * (2 * kHeadDim - state.key_compressed - state.value_compressed) * 2 +
               double(state.key_coefficients->bytes() + state.value_coefficients->bytes());
    }
    row.bytes = bytes;
    record(report, row);
  }

  if (options.wants("full_decode_step")) {
    const size_t kv_bytes = size_t(kKvHeads) * setting.length * kHeadDim * 2;
    auto full_k = make_random(backend, kv_bytes, Dtype::F16), full_v = make_random(backend, kv_bytes, Dtype::F16);
    auto full_positions = std::make_unique<Tensor>(backend, size_t(kKvHeads) * setting.length * 4);
    const ops::AttentionShape shape{kQHeads, kKvHeads, kHeadDim, 1, setting.length, setting.length, Dtype::F16, {}};
    Row row;
    row.name = "full_decode_step";
    row.shape = "layers=" + std::to_string(setting.layers) + " qh=32 kvh=8 d=128 L=" + std::to_string(setting.length);
    row.dtype = "f16";
    // One layer's K and V stand for every layer's (as the FOURIER row's state does).
    row.median_us = median_us(backend, timing, [&] {
      for (uint32_t layer = 0; layer < setting.layers; ++layer)
        ops::attention(backend, shape, {view(*q), view(*full_k), view(*full_v), view(*full_positions), View{}, view(*out), View{}});
    });
    row.bytes = double(setting.layers) * 2 * kv_bytes;
    record(report, row);
  }
}

}  // namespace

void add_fourier_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report) {
  const FourierSetting setting = options.quick ? FourierSetting{2, 2048, 64, 128} : FourierSetting{32, 32768, 512, 1024};
  if (options.wants("fourier_compress")) add_compress_row(backend, timing, setting, report);
  if (options.wants("fourier_decode_step") || options.wants("full_decode_step")) add_decode_rows(backend, timing, options, setting, report);
}

}  // namespace kvc::bench
