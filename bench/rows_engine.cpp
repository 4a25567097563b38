// kvc-bench's engine rows: what an inference engine waits for per decode token or prefill chunk
// of a 32-layer model (32 q / 8 kv heads, d = 128, f16, NeoX RoPE), on the wall clock through
// the public C API, beside the GPU time of the same work, for each way of driving libkvc
// (EnginePath: host arrays, device buffers, one step per token).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "engine_session.h"
#include "policies/faedkv.h"
#include "policies/fourier.h"

namespace kvc::bench {
namespace {

constexpr EnginePath kPaths[] = {EnginePath::Host, EnginePath::Device, EnginePath::Step};

struct EngineSizes {
  EngineShape shape;
  std::vector<uint32_t> decode_lengths;
  uint32_t prefill_length;  // the cache's length after the prefill chunk
  uint32_t chunk;           // a prefill chunk, and the fill's calls
  int decode_repetitions;
  int prefill_repetitions;  // few: a 2048-token chunk over 32K slots takes seconds on an H100
  // median_wall_us's bound on warm-up runs, which the growing caches make room for: 1024 steps
  // outlast the clocks' ramp (bench_harness.cpp's Warmup) where 256 of about 1 ms did not.
  int max_warmup_runs;
};

EngineSizes sizes_for(const Timing& timing, bool quick) {
  EngineSizes sizes;
  sizes.shape = {quick ? 2u : 32u, 32, 8, 128};
  sizes.decode_lengths = quick ? std::vector<uint32_t>{256, 512} : std::vector<uint32_t>{4096, 32768, 131072};
  // Prefill attention runs at about 25 us per query and slot on lavapipe (2 cores): --quick's
  // chunk is 32 over 256 slots, a third of a second per layer.
  sizes.prefill_length = quick ? 256 : 32768;
  sizes.chunk = quick ? 32 : 2048;
  sizes.prefill_repetitions = std::min(timing.repetitions, 3);
  sizes.decode_repetitions = quick ? sizes.prefill_repetitions : timing.repetitions;
  sizes.max_warmup_runs = quick ? 64 : 1024;  // --quick's FOURIER prompt leaves room for 64
  return sizes;
}

struct Policy {
  kvc_policy policy;
  const char* name;
  const char* length_name;  // what the row's length is to the policy, as its docs name it
};

constexpr Policy kFull{KVC_POLICY_FULL, "full", "L"};
constexpr Policy kFreqKv{KVC_POLICY_FREQKV, "freqkv", "N"};
constexpr Policy kStreaming{KVC_POLICY_STREAMING, "streaming", "c"};
constexpr Policy kH2o{KVC_POLICY_H2O, "h2o", "c"};
constexpr Policy kTova{KVC_POLICY_TOVA, "tova", "c"};
constexpr Policy kTreeKv{KVC_POLICY_TREEKV, "treekv", "c"};
constexpr Policy kSnapKv{KVC_POLICY_SNAPKV, "snapkv", "L"};
constexpr Policy kPyramidKv{KVC_POLICY_PYRAMIDKV, "pyramidkv", "L"};
constexpr Policy kHitKv{KVC_POLICY_HITKV, "hitkv", "L"};
constexpr Policy kPHitKv{KVC_POLICY_PHITKV, "phitkv", "L"};
constexpr Policy kFaedKv{KVC_POLICY_FAEDKV, "faedkv", "L"};
constexpr Policy kFourier{KVC_POLICY_FOURIER, "fourier", "L"};

// FAEDKV at its paper's defaults (S = 10, R = 50, C = 22) and the r = 0.125 (3 chunks).
kvc_faedkv_params faedkv_params() { return kvc_faedkv_params_default(); }

// The complex f32 bins FAEDKV stores per layer and kv head for a prompt of `prompt` tokens.
double faedkv_bins(uint32_t prompt) {
  const kvc_faedkv_params params = faedkv_params();
  return double(faedkv_stored_bins(faedkv_default_chunks(params.chunks, params.retain_ratio),
                                   prompt - params.sinks - params.recent_window).size());
}

std::string shape_text(const Policy& policy, uint32_t length, uint32_t n, const EngineShape& shape, EnginePath path) {
  return std::string(policy.name) + " " + policy.length_name + "=" + std::to_string(length) + " n=" + std::to_string(n) +
         " layers=" + std::to_string(shape.layers) + " qh=" + std::to_string(shape.q_heads) + " kvh=" +
         std::to_string(shape.kv_heads) + " d=" + std::to_string(shape.head_dim) + " " + path_name(path);
}

// FOURIER at its defaults (L_init 4, L_local 1024, N 512, the inverted pyramid); --quick's
// lengths (256, 512) take a local window and N of L / 8.
kvc_fourier_params fourier_params(uint32_t length) {
  kvc_fourier_params params = kvc_fourier_params_default();
  if (length <= 2 * params.local_window) params.local_window = params.num_states = length / 8;
  return params;
}

// The bytes one layer of FOURIER reads per token over `length` tokens: its
// sinks and local window whole, the middle's uncompressed dims of K and V, and the compressed
// dims' 2N f32 coefficients (the counts per layer as the policy sets them).
double fourier_layer_bytes(const EngineShape& shape, uint32_t length, uint32_t layer) {
  const kvc_fourier_params params = fourier_params(length);
  CacheConfig config;
  config.num_layers = shape.layers;
  config.num_q_heads = shape.q_heads;
  config.num_kv_heads = shape.kv_heads;
  config.head_dim = shape.head_dim;
  config.dtype = Dtype::F16;
  config.capacity = length;
  config.policy = KVC_POLICY_FOURIER;
  config.policy_params = &params;
  const std::unique_ptr<kvc::Policy> policy = make_fourier_policy(config);
  const auto& fourier = static_cast<const FourierPolicy&>(*policy);
  const double compressed = fourier.compressed_dims(layer, true) + fourier.compressed_dims(layer, false);
  const double whole = params.sinks + params.local_window, middle = length - whole;
  return shape.kv_heads * (2.0 * whole * 2 * shape.head_dim + 2.0 * middle * (2 * shape.head_dim - compressed) +
                           4.0 * 2 * params.num_states * compressed);
}

// Every layer reads K and V of `length` slots once, writes n new tokens' K and V, reads Q and
// writes O of n queries (f16). FAEDKV reads its sinks and window and its K and V bins instead,
// FOURIER what fourier_layer_bytes counts.
double bytes_moved(const EngineShape& shape, uint32_t length, uint32_t n, kvc_policy policy = KVC_POLICY_FULL) {
  const double new_tokens = 2.0 * (2.0 * n * shape.kv_heads * shape.head_dim + 2.0 * n * shape.q_heads * shape.head_dim);
  double total = 0;
  for (uint32_t layer = 0; layer < shape.layers; ++layer) {
    double held = 2.0 * 2.0 * shape.kv_heads * length * shape.head_dim;
    if (policy == KVC_POLICY_FAEDKV) {
      const kvc_faedkv_params params = faedkv_params();
      // The held slots, and the bin tables read and written back (every bin takes the token
      // leaving the window).
      held = 2.0 * (2.0 * shape.kv_heads * (params.sinks + params.recent_window) * shape.head_dim +
                    2.0 * 8.0 * shape.kv_heads * faedkv_bins(length - 1) * shape.head_dim);
    }
    if (policy == KVC_POLICY_FOURIER) held = fourier_layer_bytes(shape, length, layer);
    total += held + new_tokens;
  }
  return total;
}

// Times `measure` into a row; a libkvc call that fails skips the row with its status and message
// on stderr, and the other rows go on.
void add_row(Report& report, EngineSession& session, const RowOptions& options, const char* name, std::string shape,
             double bytes, const std::function<WallTime()>& measure) {
  if (!options.wants(name, shape)) return;
  try {
    const WallTime time = measure();
    Row row;
    row.name = name;
    row.shape = std::move(shape);
    row.dtype = "f16";
    row.median_us = time.wall_us;
    row.gpu_us = time.gpu_us;
    row.record_us = time.record_us;
    row.bytes = bytes;
    record(report, row);
  } catch (const Error& error) {
    std::fprintf(stderr, "kvc-bench: %s %s skipped: %s: %s\n", name, shape.c_str(), kvc_status_name(error.status()),
                 error.what());
    session.end_open_step();
  }
}

// A cache of `length` for decoding, filled without attending (appends alone run no policy step):
//  FULL: L - 1 tokens, so that the first token makes L; room for the tokens warm-up and
//    repetitions add (the row's L is where it starts).
//  FREQKV: N - 1 tokens; the first token fills the window, which compresses to S + gamma (N - S)
//    slots, and the layers grow back towards N, compressing every N - S - gamma (N - S) tokens:
//    the row times decoding over what the window holds then, compressions included where they
//    fall (the median leaves them out).
//  FAEDKV: a prompt of L - 1 tokens, ended: its middle M = L - 61 becomes the kept bins, and
//    every token appended folds the window's oldest in (the row's L is the original length).
//  FOURIER (fourier_params): capacity L (its window T, a power of two at the bench's lengths)
//    and a prompt of L - 1 less the tokens warm-up and repetitions add, ended (the middle
//    compressed); every token folds the local window's oldest into the coefficients.
//  STREAMING, H2O, TOVA, TREEKV: c tokens; each token appends one (c + 1, the one chunk slot the defaults give)
//    and its attend evicts one, so every token runs the policy's full step at c.
CachePtr decode_cache(EngineSession& session, const Policy& policy, uint32_t length, const EngineSizes& sizes) {
  const int room = sizes.max_warmup_runs + sizes.decode_repetitions;  // the tokens a row's runs add
  if (policy.policy == KVC_POLICY_FULL) {
    CachePtr cache = session.create_cache(policy.policy, length + room, nullptr);
    session.fill(cache.get(), length - 1);
    return cache;
  }
  if (policy.policy == KVC_POLICY_FREQKV) {
    CachePtr cache = session.create_cache(policy.policy, length, nullptr);
    session.fill(cache.get(), length - 1);
    return cache;
  }
  if (policy.policy == KVC_POLICY_FAEDKV) {
    const kvc_faedkv_params params = faedkv_params();
    CachePtr cache = session.create_cache(policy.policy, length, &params);
    session.fill(cache.get(), length - 1);
    session.end_prefill(cache.get());
    return cache;
  }
  if (policy.policy == KVC_POLICY_FOURIER) {
    const kvc_fourier_params params = fourier_params(length);
    CachePtr cache = session.create_cache(policy.policy, length, &params);
    session.fill(cache.get(), length - 1 - room);
    session.end_prefill(cache.get());
    return cache;
  }
  kvc_eviction_params params = kvc_eviction_params_default();
  // Decoding never runs TreeKV's block prefill, but the cache checks its blocks at creation:
  // (c - 4 - (c/2 - 4)) / 32 is 2048 at c = 128K, one past the limit; 64-token blocks fit.
  params.prefill_block = 64;
  CachePtr cache = session.create_cache(policy.policy, length, &params);
  session.fill(cache.get(), length);
  return cache;
}

void add_decode_rows(EngineSession& session, const EngineSizes& sizes, const RowOptions& options, Report& report) {
  for (const Policy& policy : {kFull, kFreqKv, kFaedKv, kFourier, kStreaming, kH2o, kTova, kTreeKv})
    for (uint32_t length : sizes.decode_lengths) {
      // FreqKV's fused transform holds windows up to 16K: its row takes the shortest length.
      if (policy.policy == KVC_POLICY_FREQKV && length != sizes.decode_lengths.front()) continue;
      // FAEDKV's and FOURIER's issues set their targets at 32K.
      const bool at_32k_only = policy.policy == KVC_POLICY_FAEDKV || policy.policy == KVC_POLICY_FOURIER;
      if (at_32k_only && length != sizes.decode_lengths[sizes.decode_lengths.size() / 2]) continue;
      // The decode paths where the policy takes the token inside its attention (FULL and FreqKV
      // here; the window policies too, which have prefill rows only); the chained step (a
      // model's order) everywhere.
      const bool inside = policy.policy == KVC_POLICY_FULL || policy.policy == KVC_POLICY_FREQKV;
      std::vector<EnginePath> paths(std::begin(kPaths), std::end(kPaths));
      paths.push_back(EnginePath::StepChain);
      if (inside) paths.insert(paths.end(), {EnginePath::Decode, EnginePath::DecodeChain});
      for (EnginePath path : paths)
        add_row(report, session, options, "engine_decode", shape_text(policy, length, 1, sizes.shape, path),
                bytes_moved(sizes.shape, length, 1, policy.policy), [&] {
                  CachePtr cache = decode_cache(session, policy, length, sizes);
                  return median_wall_us(sizes.decode_repetitions, sizes.max_warmup_runs, nullptr,
                                        [&] { return session.run_step(cache.get(), path, 1, false); });
                });
    }
}

// One decode step of B FULL caches of L = 4K (--quick: the first decode length) in one step,
// each layer's token appended by one kvc_cache_append_batch_device and attended by one
// kvc_attend_batch_device ("batch"), or appended and attended per cache ("per_cache", what an
// engine did before); B = 1, 8, 32 (issue 15's rows). Its floor is B times one cache's.
void add_decode_batch_rows(EngineSession& session, const EngineSizes& sizes, const RowOptions& options, Report& report) {
  const uint32_t length = sizes.decode_lengths.front();
  for (uint32_t batch : {1u, 8u, 32u})
    for (bool batched : {true, false}) {
      const std::string shape = shape_text(kFull, length, 1, sizes.shape, EnginePath::Step) + " B=" + std::to_string(batch) +
                                (batched ? " batch" : " per_cache");
      add_row(report, session, options, "engine_decode_batch", shape, batch * bytes_moved(sizes.shape, length, 1), [&] {
        std::vector<CachePtr> caches;
        std::vector<kvc_cache*> handles;
        for (uint32_t i = 0; i < batch; ++i) {
          caches.push_back(decode_cache(session, kFull, length, sizes));
          handles.push_back(caches.back().get());
        }
        return median_wall_us(sizes.decode_repetitions, sizes.max_warmup_runs, nullptr, [&] { return session.run_batch_step(handles, batched); });
      });
    }
}

// A chunk over a cache holding prefill_length - chunk tokens, refilled before every run, so
// that each run appends and attends the same chunk; the window policies' runs end the prefill
// too (a selection of budget min(1024, L / 4) tokens per layer, the papers' 1024 at L = 32K;
// PyramidKV's and P-HitKV's that budget on average, by their pyramids).
void add_prefill_rows(EngineSession& session, const EngineSizes& sizes, const RowOptions& options, Report& report) {
  const uint32_t length = sizes.prefill_length, chunk = sizes.chunk;
  kvc_window_policy_params window = kvc_window_policy_params_default();
  window.budget = std::min(1024u, length / 4);
  for (const Policy& policy : {kFull, kSnapKv, kPyramidKv, kHitKv, kPHitKv}) {
    const bool selects = policy.policy != KVC_POLICY_FULL;
    for (EnginePath path : kPaths)
      add_row(report, session, options, "engine_prefill", shape_text(policy, length, chunk, sizes.shape, path),
              bytes_moved(sizes.shape, length, chunk), [&] {
                CachePtr cache = session.create_cache(policy.policy, length, selects ? &window : nullptr);
                const auto refill = [&] { session.refill(cache.get(), length - chunk); };
                return median_wall_us(sizes.prefill_repetitions, sizes.max_warmup_runs, refill,
                                      [&] { return session.run_step(cache.get(), path, chunk, selects); });
              });
  }
}

// FreqKV's compression through the API: the decode step whose token fills the window (N at
// the first decode length), each run's cache refilled to N - 1 tokens first, so that every
// layer's attend then compresses its K and V. Beside engine_decode freqkv (whose median
// leaves the compressions out) it is what a compression adds to the token that meets it. Its
// floor adds to the decode's bytes each layer's K and V middle (M rows) read and L rows
// written.
void add_compress_rows(EngineSession& session, const EngineSizes& sizes, const RowOptions& options, Report& report) {
  const uint32_t window = sizes.decode_lengths.front();
  const kvc_freqkv_params params = kvc_freqkv_params_default();
  const uint32_t middle = window - params.sink_tokens - params.recent_tokens;
  const uint32_t retained = static_cast<uint32_t>(std::floor(double(params.retain_ratio) * middle));
  const EngineShape& shape = sizes.shape;
  const double bytes = bytes_moved(shape, window, 1) +
                       shape.layers * 2.0 * shape.kv_heads * shape.head_dim * 2.0 * (middle + retained + 2.0 * params.recent_tokens);
  for (EnginePath path : kPaths)
    add_row(report, session, options, "engine_compress", shape_text(kFreqKv, window, 1, shape, path), bytes, [&] {
      CachePtr cache = session.create_cache(KVC_POLICY_FREQKV, window, &params);
      return median_wall_us(sizes.decode_repetitions, sizes.max_warmup_runs, [&] { session.refill(cache.get(), window - 1); },
                            [&] { return session.run_step(cache.get(), path, 1, false); });
    });
}

// FAEDKV's transform of every layer's prompt at kvc_cache_end_prefill, alone: the cache is
// refilled with the prompt before each run. Its floor reads the middle's K and V once (f16)
// and writes the kept bins (complex f32).
void add_end_prefill_rows(EngineSession& session, const EngineSizes& sizes, const RowOptions& options, Report& report) {
  const uint32_t length = sizes.prefill_length;
  const kvc_faedkv_params params = faedkv_params();
  const EngineShape& shape = sizes.shape;
  const double segment = length - params.sinks - params.recent_window;
  const double bytes = shape.layers * 2.0 * shape.kv_heads * shape.head_dim * (2.0 * segment + 8.0 * faedkv_bins(length));
  add_row(report, session, options, "engine_end_prefill", shape_text(kFaedKv, length, 0, shape, EnginePath::Device), bytes, [&] {
    CachePtr cache = session.create_cache(KVC_POLICY_FAEDKV, length, &params);
    return median_wall_us(sizes.prefill_repetitions, sizes.max_warmup_runs, [&] { session.refill(cache.get(), length); },
                          [&] { return RunTimes{session.end_prefill(cache.get())}; });
  });
}

// What a serving loop pays for storage between sequences, on the host alone (the GPU runs
// nothing): `engine_create full` makes a cache where one of the same size was just destroyed,
// `engine_reset snapkv` resets a cache whose prompt ended in a selection, so that its layers
// grow back to the prompt's storage. Both allocate L slots of K, V and positions a layer, or
// take them back from the context's reclaimer (vulkan/reclaimer.h); the floor is not bytes.
void add_storage_rows(EngineSession& session, const EngineSizes& sizes, const RowOptions& options, Report& report) {
  const uint32_t length = sizes.prefill_length, chunk = sizes.chunk;
  add_row(report, session, options, "engine_create", shape_text(kFull, length, 0, sizes.shape, EnginePath::Device), 0, [&] {
    CachePtr cache = session.create_cache(KVC_POLICY_FULL, length, nullptr);
    return median_wall_us(sizes.prefill_repetitions, sizes.max_warmup_runs, [&] { cache.reset(); }, [&] {
      cache = session.create_cache(KVC_POLICY_FULL, length, nullptr);
      return RunTimes{};
    });
  });
  kvc_window_policy_params window = kvc_window_policy_params_default();
  window.budget = std::min(1024u, length / 4);
  add_row(report, session, options, "engine_reset", shape_text(kSnapKv, length, 0, sizes.shape, EnginePath::Device), 0, [&] {
    CachePtr cache = session.create_cache(KVC_POLICY_SNAPKV, length, &window);
    const auto end_prompt = [&] {
      session.refill(cache.get(), length - chunk);
      session.run_step(cache.get(), EnginePath::Step, chunk, true);
    };
    return median_wall_us(sizes.prefill_repetitions, sizes.max_warmup_runs, end_prompt, [&] {
      session.reset(cache.get());
      return RunTimes{};
    });
  });
}

}  // namespace

void add_engine_rows(const Timing& timing, const RowOptions& options, Report& report) {
  const bool decode = options.wants("engine_decode"), batch = options.wants("engine_decode_batch"), prefill = options.wants("engine_prefill"),
             end_prefill = options.wants("engine_end_prefill"), compress = options.wants("engine_compress"),
             storage = options.wants("engine_create") || options.wants("engine_reset");
  if (!decode && !batch && !prefill && !end_prefill && !compress && !storage) return;
  const EngineSizes sizes = sizes_for(timing, options.quick);
  EngineSession session(sizes.shape, sizes.chunk);
  if (decode) add_decode_rows(session, sizes, options, report);
  if (batch) add_decode_batch_rows(session, sizes, options, report);
  if (prefill) add_prefill_rows(session, sizes, options, report);
  if (end_prefill) add_end_prefill_rows(session, sizes, options, report);
  if (compress) add_compress_rows(session, sizes, options, report);
  if (storage) add_storage_rows(session, sizes, options, report);
}

}  // namespace kvc::bench
