// The reference rebuilds the segment (in double) and runs a direct softmax over it and the
// held slots: what the Vulkan route's transforms must equal.
#include <algorithm>
#include <cmath>

#include "ops/spectral_attention.h"
#include "ops/spectral_fold.h"

namespace kvc::ops {

std::vector<uint32_t> spectral_bin_map(const std::vector<uint32_t>& bins, uint32_t segment_length) {
  std::vector<uint32_t> map(segment_length, 0xFFFFFFFFu);
  for (uint32_t b = 0; b < bins.size(); ++b) {
    map[bins[b]] = b;
    if (bins[b] != 0 && 2 * uint64_t(bins[b]) != segment_length) map[segment_length - bins[b]] = b | 0x80000000u;
  }
  return map;
}

std::vector<float> spectral_reconstruct_cpu(uint32_t num_heads, uint32_t head_dim, uint32_t segment_length,
                                            const std::vector<uint32_t>& bins, const float* spectrum) {
  std::vector<float> segment(size_t(num_heads) * segment_length * head_dim);
  std::vector<double> row(head_dim);
  for (uint32_t head = 0; head < num_heads; ++head)
    for (uint32_t n = 0; n < segment_length; ++n) {
      std::fill(row.begin(), row.end(), 0.0);
      for (uint32_t b = 0; b < bins.size(); ++b) {
        const double angle = 2.0 * M_PI * double(uint64_t(bins[b]) * n % segment_length) / segment_length;
        const double weight = spectral_bin_weight(bins[b], segment_length);
        const double c = weight * std::cos(angle), s = weight * std::sin(angle);
        const float* state = spectrum + (size_t(head) * bins.size() + b) * head_dim * 2;
        for (uint32_t d = 0; d < head_dim; ++d) row[d] += state[2 * d] * c - state[2 * d + 1] * s;
      }
      float* out = &segment[(size_t(head) * segment_length + n) * head_dim];
      for (uint32_t d = 0; d < head_dim; ++d) out[d] = float(row[d]);
    }
  return segment;
}

void spectral_attention_cpu(const SpectralAttentionShape& shape, const SpectralAttentionArgs& args) {
  const uint32_t dim = shape.head_dim, group = shape.num_q_heads / shape.num_kv_heads, M = shape.segment_length;
  const std::vector<uint32_t> bins(args.bins.host<uint32_t>(), args.bins.host<uint32_t>() + shape.num_bins);
  // The states are folded into copies, written back once nothing can fail (kvc.h: a failed call
  // changes nothing).
  const size_t state_floats = size_t(shape.num_kv_heads) * shape.num_bins * dim * 2;
  std::vector<float> key_states(args.spectrum_k.host<float>(), args.spectrum_k.host<float>() + state_floats);
  std::vector<float> value_states(args.spectrum_v.host<float>(), args.spectrum_v.host<float>() + state_floats);
  if (shape.fold_excluded)
    spectral_fold_host({shape.num_kv_heads, dim, shape.slot_stride, shape.num_bins, M, shape.folded, 1, shape.excluded_slot, 1, 0, shape.dtype},
                       args.k.host<void>(), args.v.host<void>(), bins.data(), key_states.data(), value_states.data());
  const std::vector<float> keys = spectral_reconstruct_cpu(shape.num_kv_heads, dim, M, bins, key_states.data());
  const std::vector<float> values = spectral_reconstruct_cpu(shape.num_kv_heads, dim, M, bins, value_states.data());
  const double scale = 1.0 / std::sqrt(double(dim));
  const int32_t* positions = args.positions.host<int32_t>();
  std::vector<double> logits(size_t(shape.num_slots) + M), acc(dim);
  for (uint32_t i = 0; i < shape.num_queries; ++i)
    for (uint32_t head = 0; head < shape.num_q_heads; ++head) {
      const uint32_t kv_head = head / group;
      const size_t q_row = (size_t(i) * shape.num_q_heads + head) * dim;
      const auto dot = [&](const void* rows, Dtype dtype, size_t row) {
        double sum = 0;
        for (uint32_t d = 0; d < dim; ++d) sum += double(load_element(args.q.host<void>(), shape.dtype, q_row + d)) * load_element(rows, dtype, row + d);
        return sum * scale;
      };
      double max_logit = -INFINITY;
      for (uint32_t slot = 0; slot < shape.num_slots; ++slot) {
        const size_t cell = size_t(kv_head) * shape.slot_stride + slot;
        const bool visible = slot != shape.excluded_slot && positions[cell] <= shape.first_query_position + int32_t(i);
        logits[slot] = visible ? dot(args.k.host<void>(), shape.dtype, cell * dim) : -INFINITY;
        max_logit = std::max(max_logit, logits[slot]);
      }
      for (uint32_t n = 0; n < M; ++n) {
        logits[shape.num_slots + n] = dot(keys.data(), Dtype::F32, (size_t(kv_head) * M + n) * dim);
        max_logit = std::max(max_logit, logits[shape.num_slots + n]);
      }
      double total = 0;
      for (double& logit : logits) total += (logit = std::exp(logit - max_logit));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (uint32_t j = 0; j < logits.size(); ++j) {
        if (logits[j] == 0) continue;
        const bool held = j < shape.num_slots;
        const void* rows = held ? args.v.host<void>() : static_cast<const void*>(values.data());
        const size_t row = held ? (size_t(kv_head) * shape.slot_stride + j) * dim : (size_t(kv_head) * M + j - shape.num_slots) * dim;
        for (uint32_t d = 0; d < dim; ++d) acc[d] += logits[j] * load_element(rows, held ? shape.dtype : Dtype::F32, row + d);
      }
      for (uint32_t d = 0; d < dim; ++d) store_element(args.out.host<void>(), shape.dtype, q_row + d, float(acc[d] / total));
    }
  std::copy(key_states.begin(), key_states.end(), args.spectrum_k.host<float>());
  std::copy(value_states.begin(), value_states.end(), args.spectrum_v.host<float>());
}

std::shared_ptr<void> spectral_attention_keep(Backend& backend, uint32_t segment_length, BinSpan span, uint32_t num_q_heads) {
  return backend.is_cpu() ? nullptr : spectral_attention_keep_vulkan(backend, segment_length, span, num_q_heads);
}

void spectral_attention(Backend& backend, const SpectralAttentionShape& shape, const SpectralAttentionArgs& args) {
  if (backend.is_cpu()) spectral_attention_cpu(shape, args);
  else spectral_attention_vulkan(backend, shape, args);
}

}  // namespace kvc::ops
