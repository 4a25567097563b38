#include "soak/token_feed.h"

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
  const uint64_t element = dtype_size(static_cast<Dtype>(desc.dtype)),
                 kv_bytes = aligned(uint64_t(max_tokens) * desc.num_kv_heads * desc.head_dim * element, info.buffer_offset_alignment),
                 q_bytes = aligned(uint64_t(max_tokens) * desc.num_q_heads * desc.head_dim * element, info.buffer_offset_alignment);
  layout_ = {0, kv_bytes, 2 * kv_bytes, 2 * kv_bytes + q_bytes, 2 * kv_bytes + 2 * q_bytes};
  for (uint32_t layer = 0; layer < desc.num_layers; ++layer) {
    kvc_buffer* buffer = nullptr;
    if (kvc_buffer_create(context, layout_.bytes, &buffer) != KVC_OK) break;
    buffers_.emplace_back(buffer);
  }
}

kvc_status TokenFeed::feed(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                           std::vector<std::vector<unsigned char>>& outputs) {
  const size_t out_bytes = size_t(n_tokens) * desc_.num_q_heads * desc_.head_dim * dtype_size(static_cast<Dtype>(desc_.dtype));
  outputs.resize(desc_.num_layers);
  for (std::vector<unsigned char>& output : outputs) output.resize(out_bytes);
  if (path_ == FeedPath::Host) return feed_host(cache, n_tokens, inputs, outputs);
  if (buffers_.size() != desc_.num_layers) return KVC_ERROR_OUT_OF_MEMORY;
  kvc_status status = kvc_step_begin(context_);
  if (status != KVC_OK) return status;
  status = record_engine_step(cache, n_tokens, inputs, outputs);
  const kvc_status ended = kvc_step_end(context_);
  if (status == KVC_OK) status = ended;
  const kvc_status waited = kvc_step_wait(context_, UINT64_MAX);
  return status == KVC_OK ? waited : status;
}

kvc_status TokenFeed::feed_host(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                                std::vector<std::vector<unsigned char>>& outputs) {
  for (uint32_t layer = 0; layer < desc_.num_layers; ++layer) {
    kvc_status status = kvc_cache_append(cache, layer, n_tokens, desc_.dtype, inputs[layer].k.data(), inputs[layer].v.data());
    if (status == KVC_OK)
      status = kvc_attend(cache, layer, n_tokens, desc_.dtype, inputs[layer].q.data(), outputs[layer].data(), nullptr);
    if (status != KVC_OK) return status;
  }
  return KVC_OK;
}

kvc_status TokenFeed::record_engine_step(kvc_cache* cache, uint32_t n_tokens, const std::vector<LayerInputs>& inputs,
                                         std::vector<std::vector<unsigned char>>& outputs) {
  for (uint32_t layer = 0; layer < desc_.num_layers; ++layer) {
    kvc_buffer* buffer = buffers_[layer].get();
    const LayerInputs& in = inputs[layer];
    kvc_status status = kvc_buffer_write(buffer, layout_.k, in.k.size(), in.k.data());
    if (status == KVC_OK) status = kvc_buffer_write(buffer, layout_.v, in.v.size(), in.v.data());
    if (status == KVC_OK) status = kvc_buffer_write(buffer, layout_.q, in.q.size(), in.q.data());
    if (status == KVC_OK)
      status = kvc_cache_append_device(cache, layer, n_tokens, desc_.dtype, {buffer, layout_.k}, {buffer, layout_.v});
    if (status == KVC_OK)
      status = kvc_attend_device(cache, layer, n_tokens, desc_.dtype, {buffer, layout_.q}, {buffer, layout_.out}, {nullptr, 0});
    if (status == KVC_OK) status = kvc_buffer_read(buffer, layout_.out, outputs[layer].size(), outputs[layer].data());
    if (status != KVC_OK) return status;
  }
  return KVC_OK;
}

}  // namespace kvc::soak
