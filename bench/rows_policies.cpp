// kvc-bench rows for the policies' own steps, in the shapes their issues fix: FreqKV's
// compression of a full window, the observation-window selection at the end of a prefill, and
// a decode step with eviction (attention with scores + score update + eviction) against
// decode attention alone at the same cache size. The selection rows' window logits run on the
// context's matrix path (the report's header: cooperative matrices for these f16, d = 128
// shapes where the device has them), as the prefill rows do.
#include <string>

#include "bench_rows.h"
#include "ops/append_rows.h"
#include "ops/attention.h"
#include "ops/decode_evict.h"
#include "ops/eviction_step.h"
#include "ops/frequency_compress.h"
#include "policies/freqkv.h"
#include "policies/pyramid_budgets.h"
#include "policies/window_selection.h"

namespace kvc::bench {
namespace {

constexpr uint32_t kLayers = 32, kQHeads = 32, kKvHeads = 8, kHeadDim = 128;

std::unique_ptr<Tensor> make_ranks(Backend& backend, uint32_t slot_stride) {
  std::vector<int32_t> ranks(size_t(kKvHeads) * slot_stride);
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int32_t>(i % slot_stride);
  auto tensor = std::make_unique<Tensor>(backend, ranks.size() * 4);
  backend.begin();
  backend.upload(ranks.data(), ranks.size() * 4, *tensor, 0);
  backend.submit();
  return tensor;
}

void add_freqkv_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report) {
  const bool quick = options.quick;
  const uint32_t layers = quick ? 2 : kLayers;
  struct Setting {
    uint32_t window, sinks, recent;
  };
  // Llama-2's window on the FFT route, with the paper's 4 sinks and with the authors' 8 sinks
  // and 8 recent tokens (their move past the compressed slots included); N - S = 2044 =
  // 4 * 7 * 73 and 61 (prime) on the chirp-z route, 1020 and 64 on the FFT route: the two
  // routes side by side at large and small N.
  const std::vector<Setting> settings = quick ? std::vector<Setting>{{512, 4, 0}, {68, 4, 0}}
                                              : std::vector<Setting>{{4096, 4, 0}, {4096, 8, 8}, {2048, 4, 0},
                                                                     {1024, 4, 0}, {68, 4, 0}, {65, 4, 0}};
  for (const Setting& setting : settings)
    for (Dtype dtype : {Dtype::F16, Dtype::F32}) {
      const uint32_t window = setting.window;
      CacheConfig config;
      config.num_layers = layers;
      config.num_q_heads = kQHeads;
      config.num_kv_heads = kKvHeads;
      config.head_dim = kHeadDim;
      config.dtype = dtype;
      config.capacity = window;
      kvc_freqkv_params params = kvc_freqkv_params_default();
      params.sink_tokens = setting.sinks;
      params.recent_tokens = setting.recent;
      FreqKvPolicy policy(config, params);
      const ops::FrequencyCompressShape shape{kKvHeads, kHeadDim, policy.compressed_slots(), policy.retained_slots(), window, dtype};
      const char* const route_names[] = {" fft", " chirp", " dense"};
      Row row;
      row.name = "freqkv_compress";
      row.shape = "layers=" + std::to_string(layers) + " kvh=8 N=" + std::to_string(window) + " S=" + std::to_string(setting.sinks) +
                  (setting.recent ? " R=" + std::to_string(setting.recent) : "") + " d=128" +
                  (backend.is_cpu() ? "" : route_names[int(ops::frequency_compress_route(backend, shape))]);
      if (!options.wants(row.name, row.shape)) continue;
      policy.allocate_device_state(backend);
      auto states = make_random(backend, size_t(kKvHeads) * window * kHeadDim * dtype_size(dtype), dtype);
      row.dtype = dtype_name(dtype);
      // One layer's K (or V) per call, as the policy runs it; the same tensor stands for every layer.
      row.median_us = median_us(backend, timing, [&] {
        for (uint32_t layer = 0; layer < layers; ++layer) policy.compress(*states, window);
      });
      // The middle read and its L rows written; the recent rows read and written once.
      const uint32_t rows_moved = policy.compressed_slots() + policy.retained_slots() + 2 * setting.recent;
      row.bytes = double(layers) * kKvHeads * kHeadDim * dtype_size(dtype) * rows_moved;
      record(report, row);
    }
}

void add_window_selection_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report) {
  const bool quick = options.quick;
  const uint32_t window = 32, prefix = quick ? 2048 : 32768, budget = quick ? 256 : 1024, layers = quick ? 2 : kLayers;
  const uint32_t slots = prefix + window;
  const Dtype dtype = Dtype::F16;
  const size_t kv_bytes = size_t(kKvHeads) * slots * kHeadDim * 2;
  auto k = make_random(backend, kv_bytes, dtype), v = make_random(backend, kv_bytes, dtype);
  auto positions = make_ranks(backend, slots);
  auto q = make_random(backend, size_t(window) * kQHeads * kHeadDim * 2, dtype);
  auto k_to = std::make_unique<Tensor>(backend, kv_bytes), v_to = std::make_unique<Tensor>(backend, kv_bytes);
  auto positions_to = std::make_unique<Tensor>(backend, size_t(kKvHeads) * slots * 4);
  struct Variant {
    const char* name;
    WindowIndicator indicator;
    bool pyramid;
  };
  for (const Variant& variant : {Variant{"select_snapkv", WindowIndicator::PooledAttention, false},
                                 Variant{"select_pyramidkv", WindowIndicator::PooledAttention, true},
                                 Variant{"select_hitkv", WindowIndicator::HitRate, false},
                                 Variant{"select_phitkv", WindowIndicator::HitRate, true}}) {
    if (!options.wants(variant.name)) continue;
    const std::vector<uint32_t> budgets =
        variant.pyramid ? pyramid_budgets(budget, window, layers, 20.0, prefix) : std::vector<uint32_t>(layers, budget);
    std::vector<SelectionShape> shapes(layers);
    SelectionWorkspace workspace;
    for (uint32_t layer = 0; layer < layers; ++layer) {
      SelectionShape& shape = shapes[layer];
      shape.scores = {kQHeads, kKvHeads, kHeadDim, window, slots, slots, dtype, {}};
      shape.kept_prefix = budgets[layer] - window;
      shape.out_slot_stride = slots;  // the destinations are the same size as the sources here
      shape.indicator = variant.indicator;
      if (variant.indicator == WindowIndicator::HitRate) shape.scores.hit_k = std::min(budgets[layer], prefix);
      shape.hit_min_count = hits_needed(0.5f, (kQHeads / kKvHeads) * window);
    }
    workspace.reserve(backend, shapes);
    const std::vector<LayerViews> from(layers, {view(*k), view(*v), view(*positions)});
    const std::vector<LayerViews> to(layers, {view(*k_to), view(*v_to), view(*positions_to)});
    Row row;
    row.name = variant.name;
    row.shape = "layers=" + std::to_string(layers) + " qh=32 kvh=8 d=128 w=32 prefix=" + std::to_string(prefix) +
                " budget=" + std::to_string(budget);
    row.dtype = "f16";
    row.median_us = median_us(backend, timing, [&] {
      workspace.record(backend, shapes, [&](size_t) { return view(*q); }, View{}, from, to);
    });
    // The keys are read once; the kept slots' K, V and positions are read and written once.
    row.bytes = double(layers) * (double(kKvHeads) * slots * kHeadDim * 2 + 2.0 * kKvHeads * budget * (2 * kHeadDim * 2 + 4));
    record(report, row);
  }
}

// A decode step as an eviction policy's cache records it for each layer: the new token's K and V
// appended to the slot after the c held with rank c (EvictionPolicy::position_for_slot; keys
// stored as they come, rotated as attention reads them, since ranks change), attention over
// the c + 1, then the step that evicts one; FULL's row appends and attends the same way, the
// attention the eviction adds to. Each layer has its own K, V, ranks, S and C, as a cache's do
// (until 2026-11-27 the layers shared one set, which the L2 cache held at c = 1024 and 4096),
// and the ranks move as in an engine's loop. H2O's, TOVA's and TreeKV's rows leave their scoring
// and eviction for the step's end, every layer's in two dispatches, as a cache does inside a
// kvc_step (ops/decode_evict.h).
void add_eviction_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report) {
  const bool quick = options.quick;
  const uint32_t layers = quick ? 2 : kLayers;
  const Dtype dtype = Dtype::F16;
  struct Variant {
    const char* name;
    bool evicts;
    ops::EvictionRule rule;
  };
  struct LayerBuffers {
    std::unique_ptr<Tensor> k, v, positions, sums, counts, logits, lse, candidates;
  };
  for (uint32_t capacity : quick ? std::vector<uint32_t>{1024} : std::vector<uint32_t>{1024, 4096}) {
    const uint32_t slots = capacity + 1, sinks = 4, recent = capacity / 2 - sinks;  // TreeKV's 4 + 508 + 512 at c = 1024
    const size_t kv_bytes = size_t(kKvHeads) * slots * kHeadDim * 2;
    std::vector<LayerBuffers> stored(layers);
    for (LayerBuffers& layer : stored) {
      layer.k = make_random(backend, kv_bytes, dtype), layer.v = make_random(backend, kv_bytes, dtype);
      layer.positions = make_ranks(backend, slots);
      layer.sums = std::make_unique<Tensor>(backend, size_t(kKvHeads) * slots * 4);
      layer.counts = std::make_unique<Tensor>(backend, size_t(kKvHeads) * slots * 4);
      // As the cache records a decode step: attention writes the logits and lse and the step
      // forms the scores; a step that defers keeps them per layer, as the policy does.
      layer.logits = std::make_unique<Tensor>(backend, size_t(kQHeads) * slots * 4);
      layer.lse = std::make_unique<Tensor>(backend, size_t(kQHeads) * 4);
    }
    const size_t token_bytes = size_t(kKvHeads) * kHeadDim * 2;
    auto k_new = make_random(backend, token_bytes, dtype), v_new = make_random(backend, token_bytes, dtype);
    auto q = make_random(backend, size_t(kQHeads) * kHeadDim * 2, dtype);
    auto out = std::make_unique<Tensor>(backend, size_t(kQHeads) * kHeadDim * 2);
    ops::RopeParams rope{KVC_ROPE_NEOX, kHeadDim, 10000.0};
    const std::vector<uint32_t> turns = ops::rope_turn_table(rope);
    auto turn_table = std::make_unique<Tensor>(backend, turns.size() * 4);
    backend.begin();
    backend.upload(turns.data(), turns.size() * 4, *turn_table, 0);
    backend.submit();
    ops::AttentionShape attention{kQHeads, kKvHeads, kHeadDim, 1, slots, slots, dtype, rope};
    for (const Variant& variant : {Variant{"decode_step_full", false, ops::EvictionRule::Oldest},
                                   Variant{"decode_step_streaming", true, ops::EvictionRule::Oldest},
                                   Variant{"decode_step_h2o", true, ops::EvictionRule::Accumulated},
                                   Variant{"decode_step_tova", true, ops::EvictionRule::CurrentQuery},
                                   Variant{"decode_step_treekv", true, ops::EvictionRule::Tree}}) {
      if (!options.wants(variant.name)) continue;
      const bool with_scores = variant.evicts && ops::rule_keeps_sums(variant.rule);
      const ops::AppendRowsShape append{kKvHeads, kHeadDim, slots, capacity, 1, int32_t(capacity), dtype, 0, ops::RopeParams{}};
      ops::EvictionShape eviction;
      eviction.rule = variant.rule;
      eviction.num_kv_heads = kKvHeads;
      eviction.num_q_heads = kQHeads;
      eviction.head_dim = kHeadDim;
      eviction.slot_stride = slots;
      eviction.dtype = dtype;
      eviction.slots_held = slots;
      eviction.new_slots = 1;
      eviction.num_queries = 1;
      eviction.sinks = sinks;
      eviction.recent_window = recent;
      eviction.evictions = 1;
      eviction.tree_span = capacity - sinks - recent;
      const auto layer_args = [&](const LayerBuffers& layer) {
        const View logits = with_scores ? view(*layer.logits) : View{}, lse = with_scores ? view(*layer.lse) : View{};
        const ops::AttentionArgs attend{view(*q), view(*layer.k), view(*layer.v), view(*layer.positions),
                                        view(*turn_table), view(*out), View{}, logits, lse};
        const ops::EvictionArgs evict{view(*layer.k), view(*layer.v), view(*layer.positions), View{}, logits, lse,
                                      view(*layer.sums), view(*layer.counts)};
        return ops::DecodeEvictArgs{attend, evict};
      };
      const bool defers = with_scores && ops::can_defer_eviction(backend, eviction, layer_args(stored[0]).eviction);
      const size_t candidates_bytes = ops::deferred_candidates_bytes(variant.rule, kKvHeads, slots);
      for (LayerBuffers& layer : stored)
        if (defers && (!layer.candidates || layer.candidates->bytes() < candidates_bytes))
          layer.candidates = std::make_unique<Tensor>(backend, candidates_bytes);
      Row row;
      row.name = variant.name;
      row.shape = "c=" + std::to_string(capacity) + " layers=" + std::to_string(layers) + " qh=32 kvh=8 d=128";
      row.dtype = "f16";
      row.median_us = median_us(backend, timing, [&] {
        std::vector<ops::DeferredEviction> deferred;
        for (LayerBuffers& layer : stored) {
          ops::append_rows(backend, append, {view(*k_new), view(*v_new), view(*layer.k), view(*layer.v), view(*layer.positions),
                                             view(*turn_table)});
          const ops::DecodeEvictArgs args = layer_args(layer);
          // As EvictionPolicy::record_attention: one op, its scoring and eviction left for the
          // step's end where the backend can.
          if (defers) {
            deferred.push_back(ops::decode_evict_deferring(backend, attention, eviction, args, view(*layer.candidates)));
          } else if (variant.evicts) {
            ops::decode_evict(backend, attention, eviction, args);
          } else {
            ops::attention(backend, attention, args.attention);
          }
        }
        if (!deferred.empty()) ops::evict_deferred(backend, deferred);
        // As EvictionPolicy::after_attend advances TreeKV's idx (Algorithm 1, line 16), every
        // layer alike.
        if (eviction.tree_span > 0) eviction.tree_first = (eviction.tree_first + 1) % eviction.tree_span;
      });
      row.bytes = double(layers) * (2.0 * kKvHeads * slots * kHeadDim * 2 + 2.0 * kQHeads * kHeadDim * 2 + 2.0 * token_bytes);
      record(report, row);
    }
  }
}

}  // namespace

void add_policy_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report) {
  if (options.wants("freqkv_compress")) add_freqkv_rows(backend, timing, options, report);
  add_window_selection_rows(backend, timing, options, report);
  add_eviction_rows(backend, timing, options, report);
}

}  // namespace kvc::bench
