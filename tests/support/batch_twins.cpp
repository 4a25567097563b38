#include "support/batch_twins.h"

namespace kvc::test {
namespace {

// The batch's members. The decode mix: FULL at several lengths (1 token to past a thousand),
// StreamingLLM, H2O and TOVA evicting at every step (their policy_cases streams), and, without
// RoPE, FAEDKV, which computes its own attention. Every policy: each policy_cases() stream
// that takes the batch's RoPE (FAEDKV and FOURIER store keys as they come: without RoPE only),
// the window policies with room for every decode token (their streams' decode_slots fit one
// token a step).
std::vector<PolicyCase> members(const BatchOptions& options) {
  std::vector<PolicyCase> cases;
  if (options.every_policy) {
    for (PolicyCase c : policy_cases()) {
      if (options.rope && c.desc(options.dtype).rope_style == KVC_ROPE_NONE) continue;
      if (is_window_policy(c.policy)) c.window.decode_slots = KVC_DECODE_SLOTS_DEFAULT;
      cases.push_back(c);
    }
    return cases;
  }
  cases = {{"FULL, long", KVC_POLICY_FULL, 1100, {700, 301}, 0},
           {"FULL, one token", KVC_POLICY_FULL, 16, {1}, 0},
           {"FULL, odd", KVC_POLICY_FULL, 600, {257}, 0}};
  for (const PolicyCase& c : policy_cases())
    if (c.name == "STREAMING" || c.name == "H2O" || c.name == "TOVA" || (c.name == "FAEDKV" && !options.rope)) cases.push_back(c);
  return cases;
}

kvc_cache_desc member_desc(const PolicyCase& member, const BatchOptions& options) {
  kvc_cache_desc desc = member.desc(options.dtype);
  if (!options.rope) desc.rope_style = KVC_ROPE_NONE;
  return desc;
}

// The misuse tests' caches, every layer holding 5 tokens but in `fresh`: two alike (`desc`),
// one with more query heads, one without RoPE, one of another context.
struct MisuseCaches {
  explicit MisuseCaches(kvc_backend backend) : context(make_context(backend)), other(make_context(backend)) {
    REQUIRE(context);
    desc = small_cache_desc(KVC_DTYPE_F32, 64);
    wide = desc;
    wide.num_q_heads = 16;
    unrotated = desc;
    unrotated.rope_style = KVC_ROPE_NONE;
    kvc_context* ctx = context.get();
    first = make_cache(ctx, desc), second = make_cache(ctx, desc), fresh = make_cache(ctx, desc);
    wider = make_cache(ctx, wide), plain = make_cache(ctx, unrotated), foreign = make_cache(other.get(), desc);
    for (kvc_cache* cache : {first.get(), second.get(), wider.get(), plain.get(), foreign.get()}) {
      const kvc_cache_desc& own = cache == wider.get() ? wide : cache == plain.get() ? unrotated : desc;
      const StepInputs in = random_step_inputs(own, 5);
      for (uint32_t layer = 0; layer < own.num_layers; ++layer)
        REQUIRE(kvc_cache_append(cache, layer, 5, KVC_DTYPE_F32, in.k.data(), in.v.data()) == KVC_OK);
    }
  }
  ContextPtr context, other;
  kvc_cache_desc desc{}, wide{}, unrotated{};
  CachePtr first, second, fresh, wider, plain, foreign;
};

std::vector<unsigned char> read_buffer(kvc_context* context, kvc_buffer* buffer, uint64_t offset, uint64_t bytes) {
  std::vector<unsigned char> data(bytes);
  require_ok(context, kvc_buffer_read(buffer, offset, bytes, data.data()), "kvc_buffer_read");
  return data;
}

}  // namespace

void check_batch_twins(kvc_backend backend, const BatchOptions& options, double batched_tolerance) {
  const EnvironmentSetting fallback("KVC_BATCH_DECODE", options.per_cache ? "per_cache" : nullptr);
  ContextPtr context = make_context(backend);
  REQUIRE(context);
  kvc_context* ctx = context.get();
  const std::vector<PolicyCase> base = members(options);
  std::vector<PolicyCase> cases;
  for (uint32_t copy = 0; copy < options.copies; ++copy) cases.insert(cases.end(), base.begin(), base.end());
  const uint32_t n = static_cast<uint32_t>(cases.size());
  std::vector<kvc_cache_desc> descs;
  std::vector<CachePtr> batch, twins;
  for (const PolicyCase& member : cases) {
    descs.push_back(member_desc(member, options));
    batch.push_back(make_cache(ctx, descs.back()));
    twins.push_back(make_cache(ctx, descs.back()));
  }
  const kvc_cache_desc& shape = descs.front();
  const Dtype storage = static_cast<Dtype>(options.dtype);
  const uint64_t q_bytes = uint64_t(shape.num_q_heads) * shape.head_dim * dtype_size(storage);
  const uint64_t stride = round_up(q_bytes, context_info(ctx).buffer_offset_alignment);
  // The prompts, through the host path on both.
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t chunk : cases[i].prompt_chunks)
      for (uint32_t layer = 0; layer < shape.num_layers; ++layer) {
        const StepInputs in = random_step_inputs(descs[i], chunk);
        std::vector<unsigned char> out(in.q.size());
        for (kvc_cache* cache : {batch[i].get(), twins[i].get()}) {
          require_ok(ctx, kvc_cache_append(cache, layer, chunk, options.dtype, in.k.data(), in.v.data()), "kvc_cache_append");
          require_ok(ctx, kvc_attend(cache, layer, chunk, options.dtype, in.q.data(), out.data(), nullptr), "kvc_attend");
        }
      }
    if (acts_at_prompt_end(cases[i].policy))
      for (kvc_cache* cache : {batch[i].get(), twins[i].get()}) require_ok(ctx, kvc_cache_end_prefill(cache), "kvc_cache_end_prefill");
  }

  // Per member a place for its chunk's K and for its V, its query and output.
  const uint64_t kv_bytes = uint64_t(options.step_tokens) * shape.num_kv_heads * shape.head_dim * dtype_size(storage);
  const uint64_t kv_stride = round_up(kv_bytes, context_info(ctx).buffer_offset_alignment);
  BufferPtr keys = make_buffer(ctx, n * kv_stride), values = make_buffer(ctx, n * kv_stride);
  BufferPtr queries = make_buffer(ctx, n * stride), batch_out = make_buffer(ctx, n * stride), twin_out = make_buffer(ctx, n * stride);
  // The last copy's last FULL member asks for scores: it attends on its own inside the batch.
  uint32_t scored = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (cases[i].policy == KVC_POLICY_FULL) scored = i;
  const uint64_t score_bytes = uint64_t(shape.num_kv_heads) * (cases[scored].capacity + 1) * sizeof(float);
  BufferPtr batch_scores = make_buffer(ctx, score_bytes), twin_scores = make_buffer(ctx, score_bytes);
  std::vector<kvc_cache*> handles;
  std::vector<kvc_buffer_view> k_views, v_views, q_views, out_views, score_views(n, kvc_buffer_view{nullptr, 0});
  for (uint32_t i = 0; i < n; ++i) {
    handles.push_back(batch[i].get());
    k_views.push_back({keys.get(), i * kv_stride});
    v_views.push_back({values.get(), i * kv_stride});
    q_views.push_back({queries.get(), i * stride});
    out_views.push_back({batch_out.get(), i * stride});
  }
  score_views[scored] = {batch_scores.get(), 0};

  const uint32_t tokens = options.step_tokens;
  for (uint32_t step = 0; step < options.decode_steps; ++step)
    for (uint32_t layer = 0; layer < shape.num_layers; ++layer) {
      if (options.inside_step) require_ok(ctx, kvc_step_begin(ctx), "kvc_step_begin");
      for (uint32_t i = 0; i < n; ++i) {
        const StepInputs in = random_step_inputs(descs[i], tokens);
        if (options.append_batch) {
          require_ok(ctx, kvc_buffer_write(keys.get(), k_views[i].offset, kv_bytes, in.k.data()), "kvc_buffer_write");
          require_ok(ctx, kvc_buffer_write(values.get(), v_views[i].offset, kv_bytes, in.v.data()), "kvc_buffer_write");
        } else {
          for (kvc_cache* cache : {batch[i].get(), twins[i].get()})
            require_ok(ctx, kvc_cache_append(cache, layer, tokens, options.dtype, in.k.data(), in.v.data()), "kvc_cache_append");
        }
        require_ok(ctx, kvc_buffer_write(queries.get(), i * stride, q_bytes, in.q.data()), "kvc_buffer_write");
      }
      if (options.append_batch) {
        require_ok(ctx, kvc_cache_append_batch_device(ctx, n, handles.data(), layer, tokens, options.dtype, k_views.data(), v_views.data()),
                   "kvc_cache_append_batch_device");
        for (uint32_t i = 0; i < n; ++i)
          require_ok(ctx, kvc_cache_append_device(twins[i].get(), layer, tokens, options.dtype, k_views[i], v_views[i]), "kvc_cache_append_device");
      }
      const uint32_t scored_slots = layer_slots(batch[scored].get(), layer);
      if (options.attend_batch) {
        require_ok(ctx, kvc_attend_batch_device(ctx, n, handles.data(), layer, options.dtype, q_views.data(), out_views.data(), score_views.data()),
                   "kvc_attend_batch_device");
      } else {
        for (uint32_t i = 0; i < n; ++i)
          require_ok(ctx, kvc_attend_device(batch[i].get(), layer, 1, options.dtype, q_views[i], out_views[i], score_views[i]), "kvc_attend_device");
      }
      for (uint32_t i = 0; i < n; ++i)
        require_ok(ctx,
                   kvc_attend_device(twins[i].get(), layer, 1, options.dtype, q_views[i], {twin_out.get(), i * stride},
                                     i == scored ? kvc_buffer_view{twin_scores.get(), 0} : kvc_buffer_view{nullptr, 0}),
                   "kvc_attend_device");
      if (options.inside_step) {
        require_ok(ctx, kvc_step_end(ctx), "kvc_step_end");
        wait_step(ctx);
      }
      for (uint32_t i = 0; i < n; ++i) {
        INFO(cases[i].name, " (batch member ", i, " of ", n, "), decode step ", step, ", layer ", layer);
        const std::vector<unsigned char> got = read_buffer(ctx, batch_out.get(), i * stride, q_bytes);
        const std::vector<unsigned char> want = read_buffer(ctx, twin_out.get(), i * stride, q_bytes);
        const bool batched_kernels = options.attend_batch && !options.per_cache && backend != KVC_BACKEND_CPU && i != scored &&
                                     (cases[i].policy == KVC_POLICY_FULL || cases[i].policy == KVC_POLICY_STREAMING);
        if (!batched_kernels) CHECK(got == want);
        else CHECK(relative_max_error(decode(got, storage), decode(want, storage)) < batched_tolerance);
        for (uint32_t l = 0; l < shape.num_layers; ++l) CHECK(snapshot(batch[i].get(), l) == snapshot(twins[i].get(), l));
        const kvc_cache_stats got_stats = cache_stats(batch[i].get()), want_stats = cache_stats(twins[i].get());
        CHECK(got_stats.slots_held == want_stats.slots_held);
        CHECK(got_stats.tokens_seen == want_stats.tokens_seen);
        CHECK(got_stats.compressions == want_stats.compressions);
      }
      const uint64_t scores_read = uint64_t(shape.num_kv_heads) * scored_slots * sizeof(float);
      CHECK(read_buffer(ctx, batch_scores.get(), 0, scores_read) == read_buffer(ctx, twin_scores.get(), 0, scores_read));
    }
  CHECK(context_info(ctx).validation_messages == 0);
}

void check_batch_misuse(kvc_backend backend) {
  MisuseCaches caches(backend);
  kvc_context* ctx = caches.context.get();
  const kvc_cache_desc &desc = caches.desc, &wide = caches.wide;
  kvc_cache *wider = caches.wider.get(), *plain = caches.plain.get(), *foreign = caches.foreign.get(), *fresh = caches.fresh.get();
  const uint64_t q_bytes = uint64_t(wide.num_q_heads) * desc.head_dim * 4;
  BufferPtr buffer = make_buffer(ctx, 4 * q_bytes), small = make_buffer(ctx, 16), foreign_buffer = make_buffer(caches.other.get(), q_bytes);
  const kvc_buffer_view q[2] = {{buffer.get(), 0}, {buffer.get(), q_bytes}};
  const kvc_buffer_view out[2] = {{buffer.get(), 2 * q_bytes}, {buffer.get(), 3 * q_bytes}};
  // The call on `caches` with these views, layer and dtype, for expect_refused.
  const auto attend_with = [&](std::vector<kvc_cache*> caches, const kvc_buffer_view* qs, const kvc_buffer_view* outs, uint32_t layer,
                               kvc_dtype dtype) {
    return [=] { return kvc_attend_batch_device(ctx, uint32_t(caches.size()), caches.data(), layer, dtype, qs, outs, nullptr); };
  };
  const auto attend = [&](std::vector<kvc_cache*> caches) { return attend_with(caches, q, out, 0, KVC_DTYPE_F32); };
  kvc_cache* a = caches.first.get();
  kvc_cache* b = caches.second.get();
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, [&] { return kvc_attend_batch_device(ctx, 0, &a, 0, KVC_DTYPE_F32, q, out, nullptr); },
                 "n_caches is 0");
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, [&] { return kvc_attend_batch_device(ctx, 1, nullptr, 0, KVC_DTYPE_F32, q, out, nullptr); },
                 "caches, q or out is NULL");
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, attend_with({a, b}, nullptr, out, 0, KVC_DTYPE_F32), "caches, q or out is NULL");
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, attend({a, nullptr}), "caches[1] is NULL");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, attend({a, foreign}), "caches[1] belongs to another context");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, attend({a, a}), "caches[1] is caches[0] again");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, attend({a, wider}), "caches[1] has num_q_heads 16");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, attend({a, plain}), "caches[1] has other RoPE settings");
  expect_refused(ctx, a, KVC_ERROR_DTYPE_MISMATCH, attend_with({a, b}, q, out, 0, KVC_DTYPE_F16), "caches[0]: data passed as f16");
  expect_refused(ctx, a, KVC_ERROR_BAD_STATE, attend({a, fresh}), "caches[1]: layer 0 has no appended tokens");
  expect_refused(ctx, a, KVC_ERROR_OUT_OF_RANGE, attend_with({a, b}, q, out, 7, KVC_DTYPE_F32), "caches[0]: layer 7 is past");
  const kvc_buffer_view null_q[2] = {{buffer.get(), 0}, {nullptr, 0}};
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, attend_with({a, b}, null_q, out, 0, KVC_DTYPE_F32), "q[1].buffer is NULL");
  // caches[0] passed every check, its views included, before out[1] is refused: it is unchanged.
  const kvc_buffer_view short_out[2] = {{buffer.get(), 2 * q_bytes}, {small.get(), 0}};
  expect_refused(ctx, a, KVC_ERROR_BUFFER_TOO_SMALL, attend_with({a, b}, q, short_out, 0, KVC_DTYPE_F32), "out[1] needs");
  const kvc_buffer_view foreign_q[2] = {{foreign_buffer.get(), 0}, {buffer.get(), q_bytes}};
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, attend_with({a, b}, foreign_q, out, 0, KVC_DTYPE_F32), "q[0].buffer belongs to another context");
  CHECK(kvc_attend_batch_device(nullptr, 1, &a, 0, KVC_DTYPE_F32, q, out, nullptr) == KVC_ERROR_NULL_POINTER);
  // And the same call, well formed, runs.
  CHECK(attend({a, b})() == KVC_OK);
}

void check_append_batch_misuse(kvc_backend backend) {
  MisuseCaches caches(backend);
  kvc_context* ctx = caches.context.get();
  const kvc_cache_desc& desc = caches.desc;
  kvc_cache *a = caches.first.get(), *b = caches.second.get();
  const std::vector<kvc_cache*> every = {a, b, caches.fresh.get(), caches.wider.get(), caches.plain.get()};
  std::vector<std::vector<LayerSnapshot>> before;
  for (kvc_cache* cache : every) before.push_back({snapshot(cache, 0), snapshot(cache, 1)});
  const uint64_t kv_bytes = 3ull * desc.num_kv_heads * desc.head_dim * 4;  // chunks of 3 tokens
  const uint64_t alignment = context_info(ctx).buffer_offset_alignment, place = round_up(kv_bytes, alignment);
  BufferPtr buffer = make_buffer(ctx, 4 * place), small = make_buffer(ctx, 16), foreign_buffer = make_buffer(caches.other.get(), kv_bytes);
  const StepInputs chunk = random_step_inputs(desc, 6);  // two chunks: K then V of each
  require_ok(ctx, kvc_buffer_write(buffer.get(), 0, 2 * kv_bytes, chunk.k.data()), "kvc_buffer_write");
  require_ok(ctx, kvc_buffer_write(buffer.get(), 2 * place, 2 * kv_bytes, chunk.v.data()), "kvc_buffer_write");
  const kvc_buffer_view k[2] = {{buffer.get(), 0}, {buffer.get(), place}};
  const kvc_buffer_view v[2] = {{buffer.get(), 2 * place}, {buffer.get(), 3 * place}};
  // The call on `list` with these views, layer, chunk and dtype, for expect_refused.
  const auto append_with = [&](std::vector<kvc_cache*> list, const kvc_buffer_view* ks, const kvc_buffer_view* vs, uint32_t layer,
                               uint32_t n_tokens, kvc_dtype dtype) {
    return [=] { return kvc_cache_append_batch_device(ctx, uint32_t(list.size()), list.data(), layer, n_tokens, dtype, ks, vs); };
  };
  const auto append = [&](std::vector<kvc_cache*> list) { return append_with(list, k, v, 0, 3, KVC_DTYPE_F32); };
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, [&] { return kvc_cache_append_batch_device(ctx, 0, &a, 0, 3, KVC_DTYPE_F32, k, v); },
                 "n_caches is 0");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT,
                 [&] { return kvc_cache_append_batch_device(ctx, KVC_APPEND_BATCH_MAX_CACHES + 1, &a, 0, 3, KVC_DTYPE_F32, k, v); },
                 "it must be 1 to " + std::to_string(KVC_APPEND_BATCH_MAX_CACHES));
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, [&] { return kvc_cache_append_batch_device(ctx, 1, nullptr, 0, 3, KVC_DTYPE_F32, k, v); },
                 "caches, k or v is NULL");
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, append_with({a, b}, nullptr, v, 0, 3, KVC_DTYPE_F32), "caches, k or v is NULL");
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, append_with({a, b}, k, nullptr, 0, 3, KVC_DTYPE_F32), "caches, k or v is NULL");
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, append({a, nullptr}), "caches[1] is NULL");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, append({a, caches.foreign.get()}), "caches[1] belongs to another context");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, append({a, a}), "caches[1] is caches[0] again: each cache takes one chunk");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, append({a, caches.wider.get()}), "caches[1] has num_q_heads 16");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, append({a, caches.plain.get()}), "caches[1] has other RoPE settings");
  expect_refused(ctx, a, KVC_ERROR_DTYPE_MISMATCH, append_with({a, b}, k, v, 0, 3, KVC_DTYPE_F16), "caches[0]: data passed as f16");
  expect_refused(ctx, a, KVC_ERROR_OUT_OF_RANGE, append_with({a, b}, k, v, 7, 3, KVC_DTYPE_F32), "caches[0]: layer 7 is past");
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, append_with({a, b}, k, v, 0, 0, KVC_DTYPE_F32), "caches[0]: n_tokens is 0");
  expect_refused(ctx, a, KVC_ERROR_CAPACITY, append_with({a, b}, k, v, 0, 60, KVC_DTYPE_F32), "caches[0]: layer 0 holds 5 of 64 slots");
  // caches[0] passed every check, its views included, before caches[1] or its views are refused.
  const kvc_buffer_view null_k[2] = {{buffer.get(), 0}, {nullptr, 0}};
  expect_refused(ctx, a, KVC_ERROR_NULL_POINTER, append_with({a, b}, null_k, v, 0, 3, KVC_DTYPE_F32), "k[1].buffer is NULL");
  const kvc_buffer_view short_v[2] = {{buffer.get(), 2 * place}, {small.get(), 0}};
  expect_refused(ctx, a, KVC_ERROR_BUFFER_TOO_SMALL, append_with({a, b}, k, short_v, 0, 3, KVC_DTYPE_F32), "v[1] needs");
  const kvc_buffer_view foreign_k[2] = {{foreign_buffer.get(), 0}, {buffer.get(), place}};
  expect_refused(ctx, a, KVC_ERROR_INVALID_ARGUMENT, append_with({a, b}, foreign_k, v, 0, 3, KVC_DTYPE_F32),
                 "k[0].buffer belongs to another context");
  CHECK(kvc_cache_append_batch_device(nullptr, 1, &a, 0, 3, KVC_DTYPE_F32, k, v) == KVC_ERROR_NULL_POINTER);
  // Refused inside a step (where caches cannot be read), the call records nothing and the
  // step stays valid; the caches are compared below.
  require_ok(ctx, kvc_step_begin(ctx), "kvc_step_begin");
  const kvc_status in_step = append_with({a, b}, k, v, 1, 62, KVC_DTYPE_F32)();
  INFO(outcome(ctx, in_step));
  CHECK(in_step == KVC_ERROR_CAPACITY);
  CHECK(std::string(kvc_context_last_error(ctx)).find("caches[0]: layer 1 holds 5") != std::string::npos);
  require_ok(ctx, kvc_step_end(ctx), "kvc_step_end");
  wait_step(ctx);
  for (size_t i = 0; i < every.size(); ++i) {
    INFO("cache ", i);
    CHECK(snapshot(every[i], 0) == before[i][0]);
    CHECK(snapshot(every[i], 1) == before[i][1]);
  }
  // And the same call, well formed, runs: each cache takes its chunk.
  CHECK(append({a, b})() == KVC_OK);
  CHECK(layer_slots(a, 0) == 8);
  CHECK(layer_slots(b, 0) == 8);
  CHECK(layer_slots(a, 1) == 5);
}

}  // namespace kvc::test
