#include "policies/observation_window.h"

#include <algorithm>
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
  return params;
}

WindowPolicyConfig window_policy_config(const CacheConfig& cache) {
  const bool table_allowed = cache.policy == KVC_POLICY_PYRAMIDKV || cache.policy == KVC_POLICY_PHITKV;
  kvc_window_policy_params params = window_policy_defaults();
  if (cache.policy_params) {
    const auto* given = static_cast<const kvc_window_policy_params*>(cache.policy_params);
    require(given->struct_size >= sizeof(kvc_window_policy_params), KVC_ERROR_INVALID_ARGUMENT,
            field("struct_size") + " is " + std::to_string(given->struct_size) + "; set it to sizeof(kvc_window_policy_params)");
    params = *given;
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
  return config;
}

WindowPolicy::WindowPolicy(const CacheConfig& cache_config, WindowPolicyConfig config)
    : capacity_(cache_config.capacity),
      query_row_bytes_(cache_config.query_elements() * dtype_size(cache_config.dtype)),
      config_(std::move(config)),
      windows_(cache_config.num_layers) {
  for (WindowQueries& window : windows_) window.rows.resize(config_.window * query_row_bytes_);
}

void WindowPolicy::check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const {
  const uint32_t held = cache.layer(layer).slots_held;
  require(uint64_t(held) + n_tokens <= capacity_, KVC_ERROR_CAPACITY,
          "layer " + std::to_string(layer) + " holds " + std::to_string(held) + " of " + std::to_string(capacity_) + " slots; " +
              std::to_string(n_tokens) + " more do not fit (the prompt is compacted only at kvc_cache_end_prefill)");
}

int32_t WindowPolicy::position_for_slot(const Cache&, uint32_t, uint32_t, uint64_t token_index) const {
  return static_cast<int32_t>(token_index);
}

void WindowPolicy::observe_queries(Cache& cache, uint32_t layer, const void* q, uint32_t n_queries) {
  WindowQueries& window = windows_[layer];
  const uint64_t seen = cache.layer(layer).tokens_seen;  // the queries are tokens [seen - n, seen)
  if (window.observed_until + n_queries != seen) window.observed = 0;
  const size_t taken = std::min<size_t>(n_queries, config_.window);
  const size_t kept = config_.window - taken;
  std::memmove(window.rows.data(), window.rows.data() + taken * query_row_bytes_, kept * query_row_bytes_);
  std::memcpy(window.rows.data() + kept * query_row_bytes_,
              static_cast<const unsigned char*>(q) + (n_queries - taken) * query_row_bytes_, taken * query_row_bytes_);
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
    uint32_t layer, budget;
  };
  std::vector<Selection> selections;
  for (uint32_t layer = 0; layer < shape.num_layers; ++layer) {
    const LayerState& state = cache.layer(layer);
    const uint32_t budget = layer_budgets(state.slots_held)[layer];
    if (state.slots_held <= budget) continue;  // the prompt already fits
    const WindowQueries& window = windows_[layer];
    require(window.observed >= config_.window && window.observed_until == state.tokens_seen, KVC_ERROR_BAD_STATE,
            "layer " + std::to_string(layer) + ": kvc_attend did not see the queries of the last " + std::to_string(config_.window) +
                " prompt tokens; attend every prompt token of every layer before kvc_cache_end_prefill");
    selections.push_back({layer, budget});
  }
  if (selections.empty()) return;

  Backend& backend = cache.backend();
  const LayerState& first = cache.layer(selections.front().layer);
  if (!spare_k_) {
    spare_k_ = std::make_unique<Tensor>(backend, first.k->bytes());
    spare_v_ = std::make_unique<Tensor>(backend, first.v->bytes());
    spare_positions_ = std::make_unique<Tensor>(backend, first.positions->bytes());
    window_q_ = std::make_unique<Tensor>(backend, config_.window * query_row_bytes_);
  }
  std::vector<SelectionShape> steps;
  for (const Selection& selection : selections) {
    const LayerState& state = cache.layer(selection.layer);
    SelectionShape step;
    step.scores = {shape.num_q_heads, shape.num_kv_heads, shape.head_dim, config_.window, state.slots_held, cache.slot_stride(),
                   shape.dtype, shape.rope};
    step.kept_prefix = selection.budget - config_.window;
    step.indicator = config_.indicator;
    step.pool_kernel = config_.pool_kernel;
    if (config_.indicator == WindowIndicator::HitRate)
      step.scores.hit_k = std::min(config_.hit_k ? config_.hit_k : selection.budget, step.scores.num_prefix());
    step.hit_min_count = hits_needed(config_.hit_threshold, shape.group_size() * config_.window);
    workspace_.reserve(backend, step);
    steps.push_back(step);
  }
  // Layer i compacts into the storage layer i-1 left (the spare for the first); the commands
  // run in order, so each is read before it is overwritten. The owners rotate after submit.
  Tensor *free_k = spare_k_.get(), *free_v = spare_v_.get(), *free_positions = spare_positions_.get();
  backend.begin();
  for (size_t i = 0; i < selections.size(); ++i) {
    LayerState& state = cache.layer(selections[i].layer);
    backend.upload(windows_[selections[i].layer].rows.data(), config_.window * query_row_bytes_, *window_q_, 0);
    workspace_.record(backend, steps[i], view(*window_q_), {view(*state.k), view(*state.v), view(*state.positions)},
                      cache.turn_table(), {view(*free_k), view(*free_v), view(*free_positions)});
    free_k = state.k.get();
    free_v = state.v.get();
    free_positions = state.positions.get();
  }
  backend.submit();
  for (const Selection& selection : selections) {
    LayerState& state = cache.layer(selection.layer);
    std::swap(spare_k_, state.k);
    std::swap(spare_v_, state.v);
    std::swap(spare_positions_, state.positions);
    state.slots_held = selection.budget;
    state.last_append = 0;
    windows_[selection.layer].observed = 0;
    cache.count_compression();
  }
}

}  // namespace kvc
