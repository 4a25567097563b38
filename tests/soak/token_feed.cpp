#include "soak/token_feed.h"

#include <algorithm>

#include "common/dtype.h"

namespace kvc::soak {
namespace {

uint64_t aligned(uint64_t bytes, uint64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

}  // namespace

TokenFeed::TokenFeed(kvc_context* context, const kvc_cache_desc& desc, FeedPath path, uint32_t max_tokens)
    : context_(context), desc_(desc), path_(path) {
  if (path_ != FeedPath::Engine) return;
  kvc_context_info info{};
  info.struct_size = sizeof(info);
  if (kvc_context_info_get(context, &info) != KVC_OK) return;  // feed() reports the context's error
  alignment_ = info.buffer_offset_alignment;
  kvc_buffer* buffer = nullptr;
  if (kvc_buffer_create(context, layout(max_tokens).bytes, &buffer) == KVC_OK) buffer_.reset(buffer);
}

TokenFeed::Layout TokenFeed::layout(uint32_t n_tokens) const {
  const uint64_t element = dtype_size(static_cast<Dtype>(desc_.dtype)),
                 kv_bytes = uint64_t(n_tokens) * desc_.num_kv_heads * desc_.head_dim * element,
                 q_bytes = uint64_t(n_tokens) * desc_.num_q_heads * desc_.head_dim * element;
  Layout layout;
  const auto place = [&](uint64_t bytes) {
    const uint64_t offset = layout.bytes;
    layout.bytes = aligned(layout.bytes + bytes, alignment_);
    return offset;
  };
  layout.layers.resize(desc_.num_layers);
  for (LayerPlaces& layer : layout.layers) {
    layer.k = place(kv_bytes);
    layer.v = place(kv_bytes);
    layer.q = place(q_bytes);
  }
  layout.inputs_bytes = layout.bytes;
  for (LayerPlaces& layer : layout.layers) layer.out = place(q_bytes);
  return layout;
}

kvc_status TokenFeed::noted(kvc_status status) {
  if (status != KVC_OK && failure_.empty()) failure_ = kvc_context_last_error(context_);
  return status;
}

void TokenFeed::size_outputs(uint32_t n_tokens, std::vector<std::vector<unsigned char>>& outputs) const {
  const size_t out_bytes = size_t(n_tokens) * desc_.num_q_heads * desc_.head_dim * dtype_size(static_cast<Dtype>(desc_.dtype));
  outputs.resize(desc_.num_layers);
  for (std::vector<unsigned char>& output : outputs) output.resize(out_bytes);
}

kvc_status TokenFeed::feed(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                           std::vector<std::vector<unsigned char>>& outputs) {
  if (path_ == FeedPath::Host) return feed_host(cache, n_tokens, inputs, outputs);
  failure_.clear();
  kvc_status status = noted(kvc_step_begin(context_));
  if (status != KVC_OK) return status;
  status = record(cache, n_tokens, inputs, outputs);
  const kvc_status ended = noted(kvc_step_end(context_));
  if (status == KVC_OK) status = ended;
  const kvc_status waited = noted(kvc_step_wait(context_, UINT64_MAX));
  return status == KVC_OK ? waited : status;
}

kvc_status TokenFeed::feed_host(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                                std::vector<std::vector<unsigned char>>& outputs) {
  failure_.clear();
  size_outputs(n_tokens, outputs);
  for (uint32_t layer = 0; layer < desc_.num_layers; ++layer) {
    kvc_status status = noted(kvc_cache_append(cache, layer, n_tokens, desc_.dtype, inputs[layer].k.data(), inputs[layer].v.data()));
    if (status == KVC_OK)
      status = noted(kvc_attend(cache, layer, n_tokens, desc_.dtype, inputs[layer].q.data(), outputs[layer].data(), nullptr));
    if (status != KVC_OK) return status;
  }
  return KVC_OK;
}

kvc_status TokenFeed::record(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                             std::vector<std::vector<unsigned char>>& outputs) {
  if (path_ == FeedPath::Host) return feed_host(cache, n_tokens, inputs, outputs);
  failure_.clear();
  if (buffer_ == nullptr) {
    failure_ = "kvc-soak: the engine path's device buffer could not be made";
    return KVC_ERROR_OUT_OF_MEMORY;
  }
  size_outputs(n_tokens, outputs);
  const Layout places = layout(n_tokens);
  inputs_.assign(places.inputs_bytes, 0);
  for (uint32_t layer = 0; layer < desc_.num_layers; ++layer) {
    const LayerInputs& in = inputs[layer];
    const LayerPlaces& at = places.layers[layer];
    std::copy(in.k.begin(), in.k.end(), inputs_.begin() + at.k);
    std::copy(in.v.begin(), in.v.end(), inputs_.begin() + at.v);
    std::copy(in.q.begin(), in.q.end(), inputs_.begin() + at.q);
  }
  kvc_buffer* buffer = buffer_.get();
  kvc_status status = noted(kvc_buffer_write(buffer, 0, inputs_.size(), inputs_.data()));
  for (uint32_t layer = 0; layer < desc_.num_layers && status == KVC_OK; ++layer) {
    const LayerPlaces& at = places.layers[layer];
    status = noted(kvc_cache_append_device(cache, layer, n_tokens, desc_.dtype, {buffer, at.k}, {buffer, at.v}));
    if (status == KVC_OK)
      status = noted(kvc_attend_device(cache, layer, n_tokens, desc_.dtype, {buffer, at.q}, {buffer, at.out}, {nullptr, 0}));
    if (status == KVC_OK) status = noted(kvc_buffer_read(buffer, at.out, outputs[layer].size(), outputs[layer].data()));
  }
  return status;
}

}  // namespace kvc::soak
