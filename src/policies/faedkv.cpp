#include "policies/faedkv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <string>

#include "cache/cache.h"
#include "ops/compact.h"
#include "ops/segment_spectrum.h"
#include "ops/spectral_attention.h"
#include "ops/spectral_fold.h"
#include "vulkan/fft.h"

namespace kvc {
namespace {

constexpr uint32_t kMaxChunks = 4096;
constexpr uint32_t kMaxSegment = 1u << 26;  // kvc_mulmod's exact range

// max(1, round(r * C)) chunks, as sec. 3.2's "top r * C" needs a whole number.
uint32_t chunks_kept(float retain_ratio, uint32_t chunks) {
  return std::clamp(uint32_t(std::lround(double(retain_ratio) * chunks)), 1u, chunks);
}

// The lowest frequencies first: chunk 0 (bin 0 up), then C - 1 (the mirrors of the lowest
// bins), then 1, C - 2, ...: a conjugate-symmetric pair of chunks is kept together.
std::vector<bool> lowest_frequency_chunks(uint32_t chunks, uint32_t kept) {
  std::vector<bool> keep(chunks, false);
  for (uint32_t i = 0; i < kept; ++i) keep[i % 2 == 0 ? i / 2 : chunks - 1 - i / 2] = true;
  return keep;
}

}  // namespace

std::vector<bool> faedkv_default_chunks(uint32_t chunks, float retain_ratio) {
  return lowest_frequency_chunks(chunks, chunks_kept(retain_ratio, chunks));
}

std::vector<uint32_t> faedkv_stored_bins(const std::vector<bool>& kept_chunks, uint32_t segment_length) {
  const uint64_t chunks = kept_chunks.size();
  std::vector<uint32_t> bins;
  for (uint64_t c = 0; c < chunks; ++c) {
    if (!kept_chunks[c]) continue;
    for (uint64_t k = c * segment_length / chunks; k < (c + 1) * segment_length / chunks; ++k)
      bins.push_back(uint32_t(std::min<uint64_t>(k, segment_length - k)));
  }
  std::sort(bins.begin(), bins.end());
  bins.erase(std::unique(bins.begin(), bins.end()), bins.end());
  return bins;
}

namespace {

// Eq. 10 over `layer`'s middle segment, as a running mean (eq. 9 with N = M tokens folded in),
// at `num_bins` bins. Its DFT is a chirp-z transform on Vulkan: M changes with every prompt,
// and a plan of length M would cost a VkFFT planning (0.2-0.3 s on the host) per prompt length;
// it forms the `span` of bins that holds the stored ones and their mirrors.
ops::SegmentSpectrumShape prompt_transform(const CacheConfig& config, const LayerState& layer, uint32_t sinks, uint32_t recent_window,
                                           uint32_t num_bins, ops::BinSpan span) {
  const uint32_t segment = layer.slots_held - sinks - recent_window;
  ops::SegmentSpectrumShape transform{config.num_kv_heads, config.head_dim, layer.slot_stride, sinks, segment, segment, 0,
                                      num_bins, config.dtype, 1.0f / float(segment)};
  transform.chirp_z = true;
  transform.span = span;
  return transform;
}

std::vector<bool> most_important_chunks(const float* importance, uint32_t chunks, uint32_t kept) {
  std::vector<uint32_t> order(chunks);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return importance[a] > importance[b]; });
  std::vector<bool> keep(chunks, false);
  for (uint32_t i = 0; i < kept; ++i) keep[order[i]] = true;
  return keep;
}

kvc_faedkv_params checked_params(const CacheConfig& config) {
  kvc_faedkv_params params = kvc_faedkv_params_default();
  if (config.policy_params) {
    const auto* given = static_cast<const kvc_faedkv_params*>(config.policy_params);
    require(given->struct_size >= sizeof(kvc_faedkv_params), KVC_ERROR_INVALID_ARGUMENT,
            "kvc_faedkv_params.struct_size is " + std::to_string(given->struct_size) + "; set it to sizeof(kvc_faedkv_params)");
    params = *given;
  }
  require(!config.rope.enabled(), KVC_ERROR_UNSUPPORTED,
          "FAEDKV transforms keys as the model stores them, after RoPE: create the cache with rope_style KVC_ROPE_NONE and "
          "append rotated keys");
  require(params.recent_window >= 1, KVC_ERROR_INVALID_ARGUMENT, "kvc_faedkv_params.recent_window is 0; it must be at least 1");
  require(params.chunks >= 1 && params.chunks <= kMaxChunks, KVC_ERROR_INVALID_ARGUMENT,
          "kvc_faedkv_params.chunks is " + std::to_string(params.chunks) + "; it must lie in 1.." + std::to_string(kMaxChunks));
  require(std::isfinite(params.retain_ratio) && params.retain_ratio > 0.0f && params.retain_ratio <= 1.0f, KVC_ERROR_INVALID_ARGUMENT,
          "kvc_faedkv_params.retain_ratio is " + std::to_string(params.retain_ratio) + "; it must lie in (0, 1]");
  const uint64_t least_prompt = uint64_t(params.sinks) + params.recent_window + params.chunks;
  require(least_prompt <= config.capacity, KVC_ERROR_INVALID_ARGUMENT,
          "sinks + recent_window + chunks = " + std::to_string(least_prompt) + " exceeds capacity " + std::to_string(config.capacity) +
              ": no prompt the cache holds could leave a segment of one token per chunk");
  return params;
}

}  // namespace

std::unique_ptr<Policy> make_faedkv_policy(const CacheConfig& config) {
  const kvc_faedkv_params params = checked_params(config);
  std::vector<std::vector<bool>> kept(config.num_layers);
  for (uint32_t layer = 0; layer < config.num_layers; ++layer) {
    if (params.chunk_keep) {
      const uint8_t* row = params.chunk_keep + size_t(layer) * params.chunks;
      kept[layer].assign(row, row + params.chunks);
      require(std::find(kept[layer].begin(), kept[layer].end(), true) != kept[layer].end(), KVC_ERROR_INVALID_ARGUMENT,
              "kvc_faedkv_params.chunk_keep keeps no chunk of layer " + std::to_string(layer));
    } else if (params.chunk_importance) {
      const float* row = params.chunk_importance + size_t(layer) * params.chunks;
      for (uint32_t c = 0; c < params.chunks; ++c)
        require(std::isfinite(row[c]), KVC_ERROR_INVALID_ARGUMENT,
                "kvc_faedkv_params.chunk_importance of layer " + std::to_string(layer) + ", chunk " + std::to_string(c) + " is not finite");
      kept[layer] = most_important_chunks(row, params.chunks, chunks_kept(params.retain_ratio, params.chunks));
    } else {
      kept[layer] = faedkv_default_chunks(params.chunks, params.retain_ratio);
    }
  }
  return std::make_unique<FaedKvPolicy>(config, params, std::move(kept));
}

void faedkv_ablate(Cache& cache, uint32_t layer_index, const kvc_faedkv_params& params, uint32_t pruned_chunk, void* k, void* v) {
  const CacheConfig& config = cache.config();
  require(params.chunks >= 1 && params.chunks <= kMaxChunks, KVC_ERROR_INVALID_ARGUMENT,
          "kvc_faedkv_params.chunks is " + std::to_string(params.chunks) + "; it must lie in 1.." + std::to_string(kMaxChunks));
  require(pruned_chunk < params.chunks, KVC_ERROR_OUT_OF_RANGE,
          "pruned_chunk is " + std::to_string(pruned_chunk) + "; the spectrum has " + std::to_string(params.chunks) + " chunks");
  const uint32_t slots = cache.layer(layer_index).slots_held;
  // A FAEDKV cache after its prompt stores S + R + 1 slots, as many as it shows when M = 1.
  const auto* faedkv = dynamic_cast<const FaedKvPolicy*>(&cache.policy());
  require(!(faedkv && faedkv->compressed()) && cache.policy().read_slots(cache, layer_index) == slots, KVC_ERROR_BAD_STATE,
          "layer " + std::to_string(layer_index) + " no longer holds its tokens whole (a FAEDKV cache after its prompt): ablate a FULL cache");
  require(uint64_t(slots) >= uint64_t(params.sinks) + params.recent_window + params.chunks, KVC_ERROR_BAD_STATE,
          "layer " + std::to_string(layer_index) + " holds " + std::to_string(slots) +
              " tokens; the ablation needs at least sinks + recent_window + chunks");
  const uint32_t heads = config.num_kv_heads, dim = config.head_dim, segment = slots - params.sinks - params.recent_window;
  cache.read(layer_index, slots, k, v, nullptr);
  // The pruned chunk's bins, each stored once for itself and its mirror (as the policy stores them).
  std::set<uint32_t> pruned;
  for (uint64_t bin = uint64_t(pruned_chunk) * segment / params.chunks; bin < uint64_t(pruned_chunk + 1) * segment / params.chunks; ++bin)
    pruned.insert(uint32_t(std::min<uint64_t>(bin, segment - bin)));
  const std::vector<uint32_t> bins(pruned.begin(), pruned.end());
  std::unique_ptr<Backend> host = Backend::make_cpu();
  const size_t elements = size_t(heads) * slots * dim;
  Tensor rows(*host, elements * 4), bin_table(*host, bins.size() * 4), spectrum(*host, size_t(heads) * bins.size() * dim * 8);
  std::memcpy(bin_table.host(), bins.data(), bins.size() * 4);
  for (void* states : {k, v}) {
    if (!states) continue;
    float* values = static_cast<float*>(rows.host());
    for (size_t i = 0; i < elements; ++i) values[i] = load_element(states, config.dtype, i);
    // x without the chunk = x minus what the chunk's bins contribute to eq. 5's inverse DFT.
    const ops::SegmentSpectrumShape transform{heads, dim, slots, params.sinks, segment, segment, 0, uint32_t(bins.size()), Dtype::F32,
                                              1.0f / float(segment)};
    ops::segment_spectrum_cpu(transform, {view(rows), view(bin_table), view(spectrum)});
    const std::vector<float> band = ops::spectral_reconstruct_cpu(heads, dim, segment, bins, static_cast<const float*>(spectrum.host()));
    for (uint32_t head = 0; head < heads; ++head)
      for (uint32_t n = 0; n < segment; ++n)
        for (uint32_t d = 0; d < dim; ++d) {
          const size_t at = (size_t(head) * slots + params.sinks + n) * dim + d;
          store_element(states, config.dtype, at, values[at] - band[(size_t(head) * segment + n) * dim + d]);
        }
  }
}

FaedKvPolicy::FaedKvPolicy(const CacheConfig& config, const kvc_faedkv_params& params, std::vector<std::vector<bool>> kept_chunks)
    : capacity_(config.capacity),
      sinks_(params.sinks),
      recent_window_(params.recent_window),
      chunks_(params.chunks),
      kept_chunks_(std::move(kept_chunks)),
      config_(config) {
  config_.policy_params = nullptr;
}

void FaedKvPolicy::check_append(const Cache& cache, uint32_t layer, uint32_t n_tokens) const {
  if (spectra_.empty()) {
    const uint32_t held = cache.layer(layer).slots_held;
    require(uint64_t(held) + n_tokens <= capacity_, KVC_ERROR_CAPACITY, [&] {
      return "layer " + std::to_string(layer) + " holds " + std::to_string(held) + " of its " + std::to_string(capacity_) +
             " slots; FAEDKV keeps the whole prompt until kvc_cache_end_prefill, so " + std::to_string(n_tokens) + " more do not fit";
    });
  } else {
    require(n_tokens <= recent_window_, KVC_ERROR_CAPACITY, [&] {
      return std::to_string(n_tokens) + " tokens in one append after the prompt; FAEDKV takes at most recent_window = " +
             std::to_string(recent_window_) + " at a time (they replace the window's oldest)";
    });
    // Each token's position is its index in the stream, which no capacity bounds after the
    // prompt, and positions are int32 (as kvc_cache_read returns them).
    const uint64_t seen = cache.layer(layer).tokens_seen;
    require(seen + n_tokens <= uint64_t(INT32_MAX) + 1, KVC_ERROR_CAPACITY, [&] {
      return "layer " + std::to_string(layer) + " has taken " + std::to_string(seen) + " tokens; " + std::to_string(n_tokens) +
             " more would take positions past 2^31 - 1, the most an int32 position holds: reset the cache";
    });
  }
}

int32_t FaedKvPolicy::position_for_slot(const Cache&, uint32_t, uint32_t, uint64_t token_index) const {
  return static_cast<int32_t>(token_index);
}

void FaedKvPolicy::end_prefill(Cache& cache) {
  require(spectra_.empty(), KVC_ERROR_BAD_STATE, "kvc_cache_end_prefill was already called; reset the cache to start a new prompt");
  for (uint32_t layer = 0; layer < config_.num_layers; ++layer) {
    const uint32_t held = cache.layer(layer).slots_held;
    require(uint64_t(held) >= uint64_t(sinks_) + recent_window_ + chunks_, KVC_ERROR_BAD_STATE, [&] {
      return "layer " + std::to_string(layer) + " holds a prompt of " + std::to_string(held) + " tokens; FAEDKV needs at least sinks + recent_window + chunks = " +
             std::to_string(uint64_t(sinks_) + recent_window_ + chunks_) + " (a segment of one token per chunk)";
    });
    // The shaders take k N mod M exactly for M below 2^26 (shaders/include/modular.glsl).
    require(held - sinks_ - recent_window_ < kMaxSegment, KVC_ERROR_CAPACITY, [&] {
      return "layer " + std::to_string(layer) + " holds a prompt whose middle is " + std::to_string(held - sinks_ - recent_window_) +
             " tokens; FAEDKV transforms at most " + std::to_string(kMaxSegment - 1);
    });
  }
  Backend& backend = cache.backend();
  // Every layer's new state is allocated and its work recorded before any of it is kept: a
  // failure part way leaves the cache as it was. First its bins, and the span they and their
  // mirrors fill.
  std::vector<LayerSpectrum> spectra(config_.num_layers);
  for (uint32_t layer = 0; layer < config_.num_layers; ++layer) {
    LayerSpectrum& spectrum = spectra[layer];
    spectrum.segment_length = cache.layer(layer).slots_held - sinks_ - recent_window_;
    spectrum.bins = std::make_shared<const std::vector<uint32_t>>(faedkv_stored_bins(kept_chunks_[layer], spectrum.segment_length));
    spectrum.span = ops::mirrored_bin_span(*spectrum.bins, spectrum.segment_length);
  }
  // The transforms are planned before anything changes (a length VkFFT refuses fails the call
  // cleanly): the prompt's, and the queries' (each layer keeps that one: none is made on the
  // decode path). The handles hold the plans until the call ends, whatever the plan cache trims.
  std::vector<std::shared_ptr<void>> planned;
  if (!backend.is_cpu()) {
    for (uint32_t layer = 0; layer < config_.num_layers; ++layer) {
      const LayerSpectrum& spectrum = spectra[layer];
      planned.push_back(ops::segment_spectrum_keep(
          backend, prompt_transform(config_, cache.layer(layer), sinks_, recent_window_, uint32_t(spectrum.bins->size()), spectrum.span)));
      planned.push_back(ops::spectral_attention_keep(backend, spectrum.segment_length, spectrum.span,
                                                     config_.num_q_heads));  // the queries', in the op's own shape
    }
  }
  if (sinks_ > 0 && !sink_indices_) {
    std::vector<uint32_t> indices(size_t(config_.num_kv_heads) * sinks_);
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = uint32_t(i % sinks_);
    sink_indices_ = std::make_unique<Tensor>(backend, indices.size() * 4);
    backend.upload(indices.data(), indices.size() * 4, *sink_indices_, 0);
  }
  std::vector<LayerStorage> kept(config_.num_layers);
  for (uint32_t layer = 0; layer < config_.num_layers; ++layer) transform_prompt(cache, layer, spectra[layer], kept[layer]);
  const uint32_t kept_slots = sinks_ + ring_slots();
  for (uint32_t layer = 0; layer < config_.num_layers; ++layer) {
    cache.replace_storage(layer, std::move(kept[layer]), kept_slots);
    cache.layer(layer).slots_held = kept_slots;
    cache.layer(layer).last_append = 0;  // the prompt's queries may no longer attend: its middle is a spectrum now
  }
  spectra_ = std::move(spectra);
  cache.count_compression();
}

void FaedKvPolicy::transform_prompt(Cache& cache, uint32_t layer_index, LayerSpectrum& spectrum, LayerStorage& kept) const {
  Backend& backend = cache.backend();
  const LayerState& layer = cache.layer(layer_index);
  const uint32_t prompt = layer.slots_held, segment = spectrum.segment_length;
  spectrum.folded = segment;
  spectrum.ring_start = 0;
  const uint32_t num_bins = uint32_t(spectrum.bins->size());
  // The Vulkan route's table; kept on the CPU too, so both backends report the same bytes.
  const std::vector<uint32_t> map = ops::spectral_bin_map(*spectrum.bins, segment);
  const size_t state_bytes = size_t(config_.num_kv_heads) * num_bins * config_.head_dim * 8;
  // One allocation for the layer's spectrum (make_parts), one for its kept storage.
  const std::vector<std::shared_ptr<Tensor>> parts = make_parts(backend, {size_t(num_bins) * 4, map.size() * 4, state_bytes, state_bytes});
  spectrum.bin_table = parts[0];
  spectrum.bin_map = parts[1];
  spectrum.key_states = parts[2];
  spectrum.value_states = parts[3];
  backend.upload(spectrum.bins->data(), size_t(num_bins) * 4, *spectrum.bin_table, 0);
  backend.upload(map.data(), map.size() * 4, *spectrum.bin_map, 0);
  const ops::SegmentSpectrumShape transform = prompt_transform(config_, layer, sinks_, recent_window_, num_bins, spectrum.span);
  spectrum.attention_plan = ops::spectral_attention_keep(backend, segment, spectrum.span, config_.num_q_heads);

  ops::segment_spectrum(backend, transform, {view(*layer.k), view(*spectrum.bin_table), view(*spectrum.key_states)});
  ops::segment_spectrum(backend, transform, {view(*layer.v), view(*spectrum.bin_table), view(*spectrum.value_states)});

  // The sinks and the recent window move into storage of their own size (and the spare slot);
  // the prompt's goes.
  const uint32_t kept_slots = sinks_ + ring_slots();
  kept = make_layer_storage(backend, config_, kept_slots);
  const ops::CompactShape move{config_.num_kv_heads, config_.head_dim, layer.slot_stride, sinks_, sinks_,
                               prompt - recent_window_, recent_window_, config_.dtype, kept_slots};
  const View indices = sink_indices_ ? view(*sink_indices_) : view(*spectrum.bin_table);  // no sinks: never read
  ops::compact(backend, move,
               {indices, view(*layer.k), view(*layer.v), view(*layer.positions), view(*kept.k), view(*kept.v), view(*kept.positions)});
}

void FaedKvPolicy::record_fold(Cache& cache, uint32_t layer_index, uint32_t first, uint32_t count) const {
  const LayerState& layer = cache.layer(layer_index);
  const LayerSpectrum& spectrum = spectra_[layer_index];
  const ops::SpectralFoldShape fold{config_.num_kv_heads, config_.head_dim, layer.slot_stride, uint32_t(spectrum.bins->size()),
                                    spectrum.segment_length, spectrum.folded, count, sinks_, ring_slots(), first, config_.dtype};
  ops::spectral_fold(cache.backend(), fold,
                     {view(*layer.k), view(*layer.v), view(*spectrum.bin_table), view(*spectrum.key_states), view(*spectrum.value_states)});
}

AppendPlacement FaedKvPolicy::place_append(Cache& cache, uint32_t layer_index, uint32_t n_tokens) {
  if (spectra_.empty()) return Policy::place_append(cache, layer_index, n_tokens);
  const LayerSpectrum& spectrum = spectra_[layer_index];
  // The new tokens take the spare slot, then the window's oldest: a pending token and the
  // n - 1 oldest are folded first (consecutive in the ring from the spare, or from the oldest).
  // The n-th oldest leaves the window too, but keeps its slot: it becomes the pending spare.
  const uint32_t spare = spare_slot(spectrum), folds = n_tokens == 0 ? 0 : (spectrum.pending ? 1 : 0) + n_tokens - 1;
  if (folds > 0) record_fold(cache, layer_index, spectrum.pending ? spare : spectrum.ring_start, folds);
  AppendPlacement placement;
  placement.first_slot = sinks_ + spare;
  placement.wrap_after = ring_slots() - spare;
  placement.wrap_slot = sinks_;
  return placement;
}

void FaedKvPolicy::appended(Cache&, uint32_t layer_index, uint32_t n_tokens) {
  if (spectra_.empty() || n_tokens == 0) return;
  LayerSpectrum& spectrum = spectra_[layer_index];
  spectrum.folded += (spectrum.pending ? 1 : 0) + n_tokens - 1;
  spectrum.pending = true;
  spectrum.ring_start = (spectrum.ring_start + n_tokens) % ring_slots();
}

void FaedKvPolicy::check_attend(const Cache&, uint32_t, uint32_t, bool with_scores) const {
  require(spectra_.empty() || !with_scores, KVC_ERROR_UNSUPPORTED,
          "FAEDKV holds the prompt's middle as DFT bins, which have no per-slot scores: attend without scores after kvc_cache_end_prefill");
}

bool FaedKvPolicy::record_attention(Cache& cache, uint32_t layer_index, uint32_t n_queries, View q, View out, const StepScores&) {
  if (spectra_.empty()) return false;
  const LayerState& layer = cache.layer(layer_index);
  LayerSpectrum& spectrum = spectra_[layer_index];
  ops::SpectralAttentionShape shape;
  shape.num_q_heads = config_.num_q_heads;
  shape.num_kv_heads = config_.num_kv_heads;
  shape.head_dim = config_.head_dim;
  shape.num_queries = n_queries;
  shape.num_slots = layer.slots_held;
  shape.slot_stride = layer.slot_stride;
  shape.first_query_position = int32_t(layer.tokens_seen - n_queries);
  shape.num_bins = uint32_t(spectrum.bins->size());
  shape.segment_length = spectrum.segment_length;
  shape.dtype = config_.dtype;
  shape.span = spectrum.span;
  shape.excluded_slot = sinks_ + spare_slot(spectrum);
  shape.fold_excluded = spectrum.pending;
  shape.folded = spectrum.folded;
  ops::spectral_attention(cache.backend(), shape,
                          {q, view(*layer.k), view(*layer.v), view(*layer.positions), view(*spectrum.bin_table),
                           view(*spectrum.bin_map), view(*spectrum.key_states), view(*spectrum.value_states),
                           out});
  if (spectrum.pending) {
    spectrum.folded += 1;
    spectrum.pending = false;
  }
  return true;
}

uint32_t FaedKvPolicy::read_slots(const Cache& cache, uint32_t layer) const {
  return spectra_.empty() ? cache.layer(layer).slots_held : sinks_ + spectra_[layer].segment_length + recent_window_;
}

bool FaedKvPolicy::read(Cache& cache, uint32_t layer_index, void* k, void* v, int32_t* positions) {
  if (spectra_.empty()) return false;
  Backend& backend = cache.backend();
  const LayerState& layer = cache.layer(layer_index);
  LayerSpectrum& spectrum = spectra_[layer_index];
  const uint32_t heads = config_.num_kv_heads, dim = config_.head_dim, M = spectrum.segment_length;
  const size_t stored = size_t(heads) * layer.slot_stride, row_bytes = size_t(dim) * dtype_size(config_.dtype);
  std::vector<unsigned char> held_k(stored * row_bytes), held_v(stored * row_bytes);
  std::vector<int32_t> held_positions(stored);
  std::vector<float> key_states(spectrum.key_states->bytes() / 4), value_states(spectrum.value_states->bytes() / 4);
  backend.begin();
  // A pending token is in the segment: it is folded in now, as attention would have.
  if (spectrum.pending) record_fold(cache, layer_index, spare_slot(spectrum), 1);
  backend.download(*layer.k, 0, held_k.data(), held_k.size());
  backend.download(*layer.v, 0, held_v.data(), held_v.size());
  backend.download(*layer.positions, 0, held_positions.data(), held_positions.size() * 4);
  backend.download(*spectrum.key_states, 0, key_states.data(), key_states.size() * 4);
  backend.download(*spectrum.value_states, 0, value_states.data(), value_states.size() * 4);
  backend.submit();
  if (spectrum.pending) {
    spectrum.folded += 1;
    spectrum.pending = false;
  }
  const std::vector<float> segment_k = ops::spectral_reconstruct_cpu(heads, dim, M, *spectrum.bins, key_states.data());
  const std::vector<float> segment_v = ops::spectral_reconstruct_cpu(heads, dim, M, *spectrum.bins, value_states.data());

  // Per kv head: the sinks, the segment in eq. 9's order (the stored frame turned back by the
  // tokens folded since the prompt), then the window from its oldest token.
  const uint32_t slots = read_slots(cache, layer_index);
  const uint64_t turned = spectrum.folded - M;
  for (uint32_t head = 0; head < heads; ++head)
    for (uint32_t out_slot = 0; out_slot < slots; ++out_slot) {
      const size_t out_row = size_t(head) * slots + out_slot;
      const bool in_segment = out_slot >= sinks_ && out_slot < sinks_ + M;
      if (in_segment) {
        const uint32_t n = out_slot - sinks_;
        const size_t from = (size_t(head) * M + (n + turned) % M) * dim;
        for (uint32_t d = 0; d < dim; ++d) {
          if (k) store_element(k, config_.dtype, out_row * dim + d, segment_k[from + d]);
          if (v) store_element(v, config_.dtype, out_row * dim + d, segment_v[from + d]);
        }
        if (positions) positions[out_row] = int32_t(out_slot);
        continue;
      }
      const uint32_t slot = out_slot < sinks_ ? out_slot : sinks_ + (spectrum.ring_start + out_slot - sinks_ - M) % ring_slots();
      const size_t from = size_t(head) * layer.slot_stride + slot;
      if (k) std::memcpy(static_cast<unsigned char*>(k) + out_row * row_bytes, held_k.data() + from * row_bytes, row_bytes);
      if (v) std::memcpy(static_cast<unsigned char*>(v) + out_row * row_bytes, held_v.data() + from * row_bytes, row_bytes);
      if (positions) positions[out_row] = held_positions[from];
    }
  return true;
}

size_t FaedKvPolicy::device_bytes_held() const {
  size_t total = sink_indices_ ? sink_indices_->bytes() : 0;
  for (const LayerSpectrum& spectrum : spectra_)
    total += spectrum.bin_table->bytes() + spectrum.bin_map->bytes() + spectrum.key_states->bytes() +
             spectrum.value_states->bytes();
  return total;
}

void FaedKvPolicy::on_reset() { spectra_.clear(); }

}  // namespace kvc
