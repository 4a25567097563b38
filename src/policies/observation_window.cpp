#include "policies/observation_window.h"

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstring>
#include <string>

#include "cache/cache.h"
#include "policies/pyramid_budgets.h"

namespace kvc {
namespace {

constexpr uint32_t kDefaultBudget = 1024;  // HitKV's Table 1 setting, B = 1024 per layer

std::string field(const char* name) { return std::string("kvc_window_policy_params.") + name; }

}  // namespace

kvc_window_policy_params window_policy_defaults() {
  kvc_window_policy_params params{};
  params.struct_size = sizeof(kvc_window_policy_params);
  params.budget = kDefaultBudget;
  params.window = 32;         // SnapKV's observation window
  params.pool_kernel = 7;     // SnapKV's max pooling
  params.hit_k = 0;           // HitKV: K = the budget (Fig. 4)
  params.hit_threshold = 0.5f;  // HitKV: theta = 50% (Fig. 4)
  params.pyramid_beta = 20.0f;  // PyramidKV's released default
  params.decode_slots = KVC_DECODE_SLOTS_DEFAULT;
  return params;
}

WindowPolicyConfig window_policy_config(const CacheConfig& cache) {
  const bool table_allowed = cache.policy == KVC_POLICY_PYRAMIDKV || cache.policy == KVC_POLICY_PHITKV;
  kvc_window_policy_params params = window_policy_defaults();
  if (cache.policy_params) {
    const auto* given = static_cast<const kvc_window_policy_params*>(cache.policy_params);
    // 0.1's struct ended before decode_slots: such a caller gets its default.
    const size_t first_version_size = offsetof(kvc_window_policy_params, decode_slots);
    require(given->struct_size >= first_version_size, KVC_ERROR_INVALID_ARGUMENT,
            field("struct_size") + " is " + std::to_string(given->struct_size) + "; set it to sizeof(kvc_window_policy_params)");
    std::memcpy(&params, given, std::min<size_t>(given->struct_size, sizeof(params)));
  } else {
    params.budget = std::min(kDefaultBudget, cache.capacity);
  }
  WindowPolicyConfig config;
  config.indicator = cache.policy == KVC_POLICY_HITKV || cache.policy == KVC_POLICY_PHITKV ? WindowIndicator::HitRate
                                                                                           : WindowIndicator::PooledAttention;
  config.pyramid = table_allowed;
  // One softmax and one hit-threshold workgroup per (query head, window query): at most 65535.
  const uint32_t max_window = std::min(cache.capacity - 1, 65535u / cache.num_q_heads);
  require(params.window >= 1 && params.window <= max_window, KVC_ERROR_INVALID_ARGUMENT,
          field("window") + " is " + std::to_string(params.window) + "; it must be 1.." + std::to_string(max_window) +
              " (below capacity, and num_q_heads * window <= 65535)");
  require(params.budget > params.window && params.budget <= cache.capacity, KVC_ERROR_INVALID_ARGUMENT,
          field("budget") + " is " + std::to_string(params.budget) + "; it must exceed the window (" + std::to_string(params.window) +
              ") and be at most capacity (" + std::to_string(cache.capacity) + ")");
  require(params.pool_kernel % 2 == 1 && params.pool_kernel <= 255, KVC_ERROR_INVALID_ARGUMENT,
          field("pool_kernel") + " is " + std::to_string(params.pool_kernel) + "; it must be odd, 1..255");
  require(params.hit_k <= cache.capacity, KVC_ERROR_INVALID_ARGUMENT,
          field("hit_k") + " is " + std::to_string(params.hit_k) + "; it must be at most capacity (0 means the budget)");
  require(std::isfinite(params.hit_threshold) && params.hit_threshold >= 0.0f && params.hit_threshold <= 1.0f,
          KVC_ERROR_INVALID_ARGUMENT, field("hit_threshold") + " is " + std::to_string(params.hit_threshold) + "; it must be in [0, 1]");
  require(std::isfinite(params.pyramid_beta) && params.pyramid_beta >= 1.0f, KVC_ERROR_INVALID_ARGUMENT,
          field("pyramid_beta") + " is " + std::to_string(params.pyramid_beta) + "; it must be finite and >= 1");
  require((params.layer_budgets == nullptr) == (params.num_layer_budgets == 0), KVC_ERROR_INVALID_ARGUMENT,
          field("layer_budgets") + " and num_layer_budgets must be given together");
  if (params.layer_budgets) {
    require(table_allowed, KVC_ERROR_INVALID_ARGUMENT, field("layer_budgets") + " is for KVC_POLICY_PYRAMIDKV and KVC_POLICY_PHITKV only");
    require(params.num_layer_budgets == cache.num_layers, KVC_ERROR_INVALID_ARGUMENT,
            field("num_layer_budgets") + " is " + std::to_string(params.num_layer_budgets) + "; the cache has " +
                std::to_string(cache.num_layers) + " layers");
    for (uint32_t layer = 0; layer < cache.num_layers; ++layer)
      require(params.layer_budgets[layer] > params.window && params.layer_budgets[layer] <= cache.capacity, KVC_ERROR_INVALID_ARGUMENT,
              field("layer_budgets") + "[" + std::to_string(layer) + "] is " + std::to_string(params.layer_budgets[layer]) +
                  "; it must exceed the window (" + std::to_string(params.window) + ") and be at most capacity (" +
                  std::to_string(cache.capacity) + ")");
    config.layer_budgets.assign(params.layer_budgets, params.layer_budgets + cache.num_layers);
  }
  config.budget = params.budget;
  config.window = params.window;
  config.pool_kernel = params.pool_kernel;
  config.hit_k = params.hit_k;
  config.hit_threshold = params.hit_threshold;
  config.pyramid_beta = params.pyramid_beta;
  config.decode_slots = params.decode_slots;
  return config;
}

WindowPolicy::WindowPolicy(const CacheConfig& cache_config, WindowPolicyConfig config)
    : capacity_(cache_config.capacity),
      query_row_bytes_(cache_config.query_elements() * dtype_size(cache_config.dtype)),
      config_(std::move(config)),
      windows_(cache_config.num_layers) {}

void WindowPolicy::allocate_device_state(Backend& backend) {
  const size_t window_bytes = config_.window * query_row_bytes_;
  query_rings_ = std::make_unique<Tensor>(backend, windows_.size() * window_bytes);
  window_q_ = std::make_unique<Tensor>(backend, window_bytes);
}

size_t WindowPolicy::device_bytes_held() const { return query_rings_->bytes() + window_q_->bytes() + workspace_.bytes_held(); }

void WindowPolicy::check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const {
  // A compacted layer holds budget + decode slots; before that, capacity.
  const uint32_t held = cache.layer(layer).slots_held, room = cache.layer(layer).slot_stride;
  require(uint64_t(held) + n_tokens <= room, KVC_ERROR_CAPACITY,
          [&] { return "layer " + std::to_string(layer) + " holds " + std::to_string(held) + " of " + std::to_string(room) + " slots; " +
              std::to_string(n_tokens) + " more do not fit (the prompt is compacted only at kvc_cache_end_prefill, to " +
              "budget + kvc_window_policy_params.decode_slots)"; });
}

int32_t WindowPolicy::position_for_slot(const Cache&, uint32_t, uint32_t, uint64_t token_index) const {
  return static_cast<int32_t>(token_index);
}

void WindowPolicy::copy_ring(Backend& backend, uint32_t layer, uint64_t first_token, uint32_t tokens, View rows,
                             bool to_ring) const {
  const size_t ring_base = layer * config_.window * query_row_bytes_;
  for (uint32_t done = 0; done < tokens;) {
    const uint32_t ring_row = uint32_t((first_token + done) % config_.window);
    const uint32_t run = std::min(tokens - done, config_.window - ring_row);  // up to the ring's end
    const size_t ring_offset = ring_base + ring_row * query_row_bytes_, rows_offset = rows.offset + done * query_row_bytes_;
    if (to_ring) backend.copy(*rows.tensor, rows_offset, *query_rings_, ring_offset, run * query_row_bytes_);
    else backend.copy(*query_rings_, ring_offset, *rows.tensor, rows_offset, run * query_row_bytes_);
    done += run;
  }
}

void WindowPolicy::observe_queries(Cache& cache, uint32_t layer, View q, uint32_t n_queries) {
  WindowQueries& window = windows_[layer];
  const uint64_t seen = cache.layer(layer).tokens_seen;  // the queries are tokens [seen - n, seen)
  if (window.observed_until + n_queries != seen) window.observed = 0;
  const uint32_t taken = std::min(n_queries, config_.window);
  copy_ring(cache.backend(), layer, seen - taken, taken, View{q.tensor, q.offset + (n_queries - taken) * query_row_bytes_}, true);
  window.observed += n_queries;
  window.observed_until = seen;
}

std::vector<uint32_t> WindowPolicy::layer_budgets(uint32_t slots_held) const {
  const uint32_t num_layers = static_cast<uint32_t>(windows_.size());
  if (!config_.layer_budgets.empty()) return config_.layer_budgets;
  if (!config_.pyramid || slots_held <= config_.window) return std::vector<uint32_t>(num_layers, config_.budget);
  return pyramid_budgets(config_.budget, config_.window, num_layers, config_.pyramid_beta, slots_held - config_.window);
}

void WindowPolicy::end_prefill(Cache& cache) {
  const CacheConfig& shape = cache.config();
  struct Selection {
    uint32_t layer, budget, slot_stride;
    LayerStorage storage;  // compacted into
  };
  std::vector<Selection> selections;
  for (uint32_t layer = 0; layer < shape.num_layers; ++layer) {
    const LayerState& state = cache.layer(layer);
    const uint32_t budget = layer_budgets(state.slots_held)[layer];
    if (state.slots_held <= budget) continue;  // the prompt already fits
    const WindowQueries& window = windows_[layer];
    require(window.observed >= config_.window && window.observed_until == state.tokens_seen, KVC_ERROR_BAD_STATE, [&] {
      return "layer " + std::to_string(layer) + ": kvc_attend did not see the queries of the last " + std::to_string(config_.window) +
             " prompt tokens; attend every prompt token of every layer before kvc_cache_end_prefill";
    });
    // The room `capacity` left after this prompt, unless the application asked for less (or more).
    const uint32_t decode_slots = config_.decode_slots == KVC_DECODE_SLOTS_DEFAULT ? capacity_ - state.slots_held : config_.decode_slots;
    selections.push_back({layer, budget, uint32_t(std::min<uint64_t>(capacity_, uint64_t(budget) + decode_slots)), {}});
  }
  if (selections.empty()) return;

  // Storage is allocated before anything is recorded, and the layers change only once every
  // selection is recorded: a failure on the way (out of memory) changes nothing.
  Backend& backend = cache.backend();
  std::vector<SelectionShape> steps;
  for (Selection& selection : selections) {
    const LayerState& state = cache.layer(selection.layer);
    SelectionShape step;
    step.scores = {shape.num_q_heads, shape.num_kv_heads, shape.head_dim, config_.window, state.slots_held, state.slot_stride,
                   shape.dtype, shape.rope};
    step.kept_prefix = selection.budget - config_.window;
    step.indicator = config_.indicator;
    step.pool_kernel = config_.pool_kernel;
    if (config_.indicator == WindowIndicator::HitRate)
      step.scores.hit_k = std::min(config_.hit_k ? config_.hit_k : selection.budget, step.scores.num_prefix());
    step.hit_min_count = hits_needed(config_.hit_threshold, shape.group_size() * config_.window);
    step.out_slot_stride = selection.slot_stride;
    steps.push_back(step);
    selection.storage = make_layer_storage(backend, cache.config(), selection.slot_stride);
  }
  workspace_.reserve(backend, steps);
  std::vector<LayerViews> from, to;
  for (const Selection& selection : selections) {
    const LayerState& state = cache.layer(selection.layer);
    from.push_back({view(*state.k), view(*state.v), view(*state.positions)});
    to.push_back({view(*selection.storage.k), view(*selection.storage.v), view(*selection.storage.positions)});
  }
  // The window's queries wait in the layer's ring: each layer's are copied out just before its scores.
  auto window_queries = [&](size_t i) {
    const LayerState& state = cache.layer(selections[i].layer);
    copy_ring(backend, selections[i].layer, state.tokens_seen - config_.window, config_.window, view(*window_q_), false);
    return view(*window_q_);
  };
  workspace_.record(backend, steps, window_queries, cache.turn_table(), from, to);
  for (Selection& selection : selections) {
    LayerState& state = cache.layer(selection.layer);
    // The prompt's storage is released once the recorded selection has read it.
    cache.replace_storage(selection.layer, std::move(selection.storage), selection.slot_stride);
    state.slots_held = selection.budget;
    state.last_append = 0;
    windows_[selection.layer].observed = 0;
    cache.count_compression();
  }
  workspace_ = SelectionWorkspace();  // needed again only at the next prompt's end
}

}  // namespace kvc
