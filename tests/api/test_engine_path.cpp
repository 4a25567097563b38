// The engine path on the CPU backend: device buffers (host memory there), kvc_cache_append_device
// and kvc_attend_device, and steps, which on the CPU only group calls. For every policy the
// device and one-step paths must give exactly what the host path gives; misuse returns the
// documented status and changes nothing. Runs under the sanitizers with the CPU suite.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>

#include "support/engine_paths.h"

namespace kvc {

TEST_CASE("engine path on the CPU: buffers move exact bytes at any offset, in and out of a step") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  CHECK(test::context_info(context.get()).buffer_offset_alignment == 16);
  test::check_buffer_round_trip(context.get());
}

TEST_CASE("engine path on the CPU: the device, one-step and decode paths equal the host path exactly, every policy") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  const std::vector<test::PolicyCase> cases = test::policy_cases();
  for (kvc_dtype dtype : {KVC_DTYPE_F32, KVC_DTYPE_F16})
    for (const test::PolicyCase& c : cases) {
      INFO(c.name, " ", std::string(dtype_name(static_cast<Dtype>(dtype))));
      const kvc_cache_desc desc = c.desc(dtype);
      test::CacheFeed host(context.get(), desc, test::FeedPath::Host, c.largest_chunk()),
          device(context.get(), desc, test::FeedPath::Device, c.largest_chunk()),
          stepped(context.get(), desc, test::FeedPath::OneStep, c.largest_chunk()),
          decoded(context.get(), desc, test::FeedPath::Decode, c.largest_chunk());
      const std::vector<test::CacheFeed*> feeds = {&host, &device, &stepped, &decoded};
      const auto snapshots = test::feed_stream(c, desc, feeds, [&](const test::ChunkReport&, const std::vector<test::CacheFeed*>& fed) {
        test::check_identical_results(desc, fed, 0);
      });
      const kvc_cache_stats expected = test::cache_stats(host.cache());
      if (c.policy != KVC_POLICY_FULL) CHECK(expected.compressions > 0);  // the stream made the policy act
      for (size_t f = 1; f < feeds.size(); ++f) {
        INFO(test::path_name(feeds[f]->path()), " path");
        CHECK(snapshots[f] == snapshots[0]);
        const kvc_cache_stats stats = test::cache_stats(feeds[f]->cache());
        CHECK(stats.tokens_seen == expected.tokens_seen);
        CHECK(stats.slots_held == expected.slots_held);
        CHECK(stats.compressions == expected.compressions);
        CHECK(stats.device_bytes_held == expected.device_bytes_held);
      }
      if (!test::is_window_policy(c.policy)) continue;
      // A reset grows every compacted layer back to `capacity` slots: the storage the end of the
      // prompt released comes back.
      const uint64_t storage_before = test::window_storage_bytes(c, desc, expected.bytes_per_slot, false),
                     storage_after = test::window_storage_bytes(c, desc, expected.bytes_per_slot, true);
      for (const test::CacheFeed* feed : feeds) {
        const uint64_t held = test::cache_stats(feed->cache()).device_bytes_held;
        REQUIRE(kvc_cache_reset(feed->cache()) == KVC_OK);
        const kvc_cache_stats stats = test::cache_stats(feed->cache());
        CHECK(stats.slots_held == 0);
        CHECK(stats.device_bytes_held == held + (storage_before - storage_after));
      }
    }
}

TEST_CASE("engine path on the CPU: a kvc_window_policy_params from before decode_slots means its default") {
  // A 0.1 caller's struct ends before decode_slots: whatever follows it must not be read. Its
  // cache must act and allocate as one given KVC_DECODE_SLOTS_DEFAULT explicitly.
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  const test::PolicyCase explicit_default = [] {
    test::PolicyCase c = test::policy_case(KVC_POLICY_SNAPKV);
    c.window.decode_slots = KVC_DECODE_SLOTS_DEFAULT;
    return c;
  }();
  test::PolicyCase old_caller = explicit_default;
  old_caller.window.struct_size = offsetof(kvc_window_policy_params, decode_slots);
  old_caller.window.decode_slots = 3;
  const kvc_cache_desc desc = explicit_default.desc(KVC_DTYPE_F32);
  test::CacheFeed with_default(context.get(), desc, test::FeedPath::Host, explicit_default.largest_chunk()),
      from_old_caller(context.get(), old_caller.desc(KVC_DTYPE_F32), test::FeedPath::Host, old_caller.largest_chunk());
  const auto snapshots = test::feed_stream(explicit_default, desc, {&with_default, &from_old_caller},
                                           [&](const test::ChunkReport&, const std::vector<test::CacheFeed*>& fed) {
                                             test::check_identical_results(desc, fed, 0);
                                           });
  CHECK(snapshots[1] == snapshots[0]);
  CHECK(test::cache_stats(from_old_caller.cache()).device_bytes_held == test::cache_stats(with_default.cache()).device_bytes_held);
}

TEST_CASE("engine path on the CPU: misuse of buffers and views is refused with its status and changes nothing") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU), other = test::make_context(KVC_BACKEND_CPU);
  const kvc_cache_desc desc = test::small_cache_desc(KVC_DTYPE_F32, 64);
  test::CachePtr cache = test::make_cache(context.get(), desc);
  const test::StepInputs in = test::random_step_inputs(desc, 4);
  std::vector<unsigned char> host_out(in.q.size());
  REQUIRE(kvc_cache_append(cache.get(), 0, 4, desc.dtype, in.k.data(), in.v.data()) == KVC_OK);
  REQUIRE(kvc_attend(cache.get(), 0, 4, desc.dtype, in.q.data(), host_out.data(), nullptr) == KVC_OK);

  // One buffer holding K, V, Q, the output and the scores of 4 tokens, back to back, and the
  // same bytes in a buffer of another context.
  const uint64_t kv_bytes = in.k.size(), q_bytes = in.q.size(), score_bytes = uint64_t(desc.num_kv_heads) * 4 * sizeof(float);
  const uint64_t k_at = 0, v_at = kv_bytes, q_at = 2 * kv_bytes, out_at = q_at + q_bytes, scores_at = out_at + q_bytes;
  const uint64_t bytes = scores_at + score_bytes;
  test::BufferPtr buffer = test::make_buffer(context.get(), bytes), foreign = test::make_buffer(other.get(), bytes);
  for (kvc_buffer* b : {buffer.get(), foreign.get()}) {
    REQUIRE(kvc_buffer_write(b, k_at, kv_bytes, in.k.data()) == KVC_OK);
    REQUIRE(kvc_buffer_write(b, v_at, kv_bytes, in.v.data()) == KVC_OK);
    REQUIRE(kvc_buffer_write(b, q_at, q_bytes, in.q.data()) == KVC_OK);
  }
  const kvc_buffer_view k{buffer.get(), k_at}, v{buffer.get(), v_at}, q{buffer.get(), q_at}, out{buffer.get(), out_at},
      scores{buffer.get(), scores_at}, none{};
  const auto at = [&](uint64_t offset) { return kvc_buffer_view{buffer.get(), offset}; };
  // The first aligned place from which a tensor of `size` bytes runs past the buffer's end.
  const uint64_t alignment = test::context_info(context.get()).buffer_offset_alignment;
  const auto past_end = [&](uint64_t size) { return at(test::round_up(bytes - size + 1, alignment)); };
  const auto of_other = [&](kvc_buffer_view view) { return kvc_buffer_view{foreign.get(), view.offset}; };
  std::vector<unsigned char> buffer_before(bytes);
  REQUIRE(kvc_buffer_read(buffer.get(), 0, bytes, buffer_before.data()) == KVC_OK);

  const auto expect_refused = [&](kvc_status status, kvc_status got) {
    INFO("expected ", std::string(kvc_status_name(status)), ", got ", test::outcome(context.get(), got));
    CHECK(got == status);
    CHECK(std::strlen(kvc_context_last_error(context.get())) > 0);
  };
  const test::LayerSnapshot before0 = test::snapshot(cache.get(), 0), before1 = test::snapshot(cache.get(), 1);
  const kvc_cache_stats stats_before = test::cache_stats(cache.get());
  struct Refusal {
    const char* what;
    kvc_status status;
    std::function<kvc_status()> call;
  };
  const uint32_t four = 4;
  const Refusal refusals[] = {
      {"k without a buffer", KVC_ERROR_NULL_POINTER, [&] { return kvc_cache_append_device(cache.get(), 0, four, desc.dtype, none, v); }},
      {"v without a buffer", KVC_ERROR_NULL_POINTER, [&] { return kvc_cache_append_device(cache.get(), 0, four, desc.dtype, k, none); }},
      {"q without a buffer", KVC_ERROR_NULL_POINTER, [&] { return kvc_attend_device(cache.get(), 0, four, desc.dtype, none, out, none); }},
      {"out without a buffer", KVC_ERROR_NULL_POINTER, [&] { return kvc_attend_device(cache.get(), 0, four, desc.dtype, q, none, none); }},
      {"k of another context", KVC_ERROR_INVALID_ARGUMENT,
       [&] { return kvc_cache_append_device(cache.get(), 0, four, desc.dtype, of_other(k), v); }},
      {"v of another context", KVC_ERROR_INVALID_ARGUMENT,
       [&] { return kvc_cache_append_device(cache.get(), 0, four, desc.dtype, k, of_other(v)); }},
      {"q of another context", KVC_ERROR_INVALID_ARGUMENT,
       [&] { return kvc_attend_device(cache.get(), 0, four, desc.dtype, of_other(q), out, none); }},
      {"out of another context", KVC_ERROR_INVALID_ARGUMENT,
       [&] { return kvc_attend_device(cache.get(), 0, four, desc.dtype, q, of_other(out), none); }},
      {"scores of another context", KVC_ERROR_INVALID_ARGUMENT,
       [&] { return kvc_attend_device(cache.get(), 0, four, desc.dtype, q, out, of_other(scores)); }},
      // Tensors running past the buffer's end, from the first aligned place, or from an offset past it.
      {"k past the end", KVC_ERROR_BUFFER_TOO_SMALL,
       [&] { return kvc_cache_append_device(cache.get(), 0, four, desc.dtype, past_end(kv_bytes), v); }},
      {"v past the end", KVC_ERROR_BUFFER_TOO_SMALL,
       [&] { return kvc_cache_append_device(cache.get(), 0, four, desc.dtype, k, at(UINT64_MAX - (alignment - 1))); }},
      {"q past the end", KVC_ERROR_BUFFER_TOO_SMALL,
       [&] { return kvc_attend_device(cache.get(), 0, four, desc.dtype, past_end(q_bytes), out, none); }},
      {"out past the end", KVC_ERROR_BUFFER_TOO_SMALL,
       [&] { return kvc_attend_device(cache.get(), 0, four, desc.dtype, q, past_end(q_bytes), none); }},
      // 4 slots held: [2][4] scores.
      {"scores past the end", KVC_ERROR_BUFFER_TOO_SMALL,
       [&] { return kvc_attend_device(cache.get(), 0, four, desc.dtype, q, out, past_end(score_bytes)); }},
      {"K/V as f16", KVC_ERROR_DTYPE_MISMATCH, [&] { return kvc_cache_append_device(cache.get(), 0, four, KVC_DTYPE_F16, k, v); }},
      {"Q as f16", KVC_ERROR_DTYPE_MISMATCH, [&] { return kvc_attend_device(cache.get(), 0, four, KVC_DTYPE_F16, q, out, none); }},
      {"layer 2 of 2", KVC_ERROR_OUT_OF_RANGE, [&] { return kvc_cache_append_device(cache.get(), 2, four, desc.dtype, k, v); }},
      {"0 tokens", KVC_ERROR_INVALID_ARGUMENT, [&] { return kvc_cache_append_device(cache.get(), 0, 0, desc.dtype, k, v); }},
      // 5 queries and outputs fit from offset 0 (over K, V and Q): only the count is wrong.
      {"5 queries after an append of 4", KVC_ERROR_BAD_STATE,
       [&] { return kvc_attend_device(cache.get(), 0, 5, desc.dtype, at(0), at(0), none); }},
      {"attend on a layer never appended", KVC_ERROR_BAD_STATE,
       [&] { return kvc_attend_device(cache.get(), 1, four, desc.dtype, q, out, none); }},
      // kvc_decode_device: one token's K and V, one query; each view checked, and the layer.
      {"decode: k without a buffer", KVC_ERROR_NULL_POINTER, [&] { return kvc_decode_device(cache.get(), 0, desc.dtype, none, v, q, out); }},
      {"decode: out without a buffer", KVC_ERROR_NULL_POINTER, [&] { return kvc_decode_device(cache.get(), 0, desc.dtype, k, v, q, none); }},
      {"decode: v of another context", KVC_ERROR_INVALID_ARGUMENT,
       [&] { return kvc_decode_device(cache.get(), 0, desc.dtype, k, of_other(v), q, out); }},
      {"decode: q of another context", KVC_ERROR_INVALID_ARGUMENT,
       [&] { return kvc_decode_device(cache.get(), 0, desc.dtype, k, v, of_other(q), out); }},
      {"decode: k past the end", KVC_ERROR_BUFFER_TOO_SMALL,
       [&] { return kvc_decode_device(cache.get(), 0, desc.dtype, past_end(kv_bytes / 4), v, q, out); }},
      {"decode: out past the end", KVC_ERROR_BUFFER_TOO_SMALL,
       [&] { return kvc_decode_device(cache.get(), 0, desc.dtype, k, v, q, past_end(q_bytes / 4)); }},
      {"decode: f16", KVC_ERROR_DTYPE_MISMATCH, [&] { return kvc_decode_device(cache.get(), 0, KVC_DTYPE_F16, k, v, q, out); }},
      {"decode: layer 2 of 2", KVC_ERROR_OUT_OF_RANGE, [&] { return kvc_decode_device(cache.get(), 2, desc.dtype, k, v, q, out); }},
      {"a write past the end", KVC_ERROR_BUFFER_TOO_SMALL, [&] { return kvc_buffer_write(buffer.get(), bytes - 2, 3, in.k.data()); }},
      {"a write without source", KVC_ERROR_NULL_POINTER, [&] { return kvc_buffer_write(buffer.get(), 0, 3, nullptr); }},
      {"a size without destination", KVC_ERROR_NULL_POINTER, [&] { return kvc_buffer_size(buffer.get(), nullptr); }},
  };
  for (const Refusal& refusal : refusals) {
    INFO(std::string(refusal.what));
    expect_refused(refusal.status, refusal.call());
    CHECK(test::snapshot(cache.get(), 0) == before0);
    CHECK(test::snapshot(cache.get(), 1) == before1);
    const kvc_cache_stats stats = test::cache_stats(cache.get());
    CHECK(stats.tokens_seen == stats_before.tokens_seen);
    CHECK(stats.slots_held == stats_before.slots_held);
    std::vector<unsigned char> buffer_now(bytes);
    REQUIRE(kvc_buffer_read(buffer.get(), 0, bytes, buffer_now.data()) == KVC_OK);
    CHECK(buffer_now == buffer_before);
  }

  // NULL handles: refused, never dereferenced.
  kvc_buffer* untouched = reinterpret_cast<kvc_buffer*>(0x1);
  uint64_t size = 7;
  CHECK(kvc_buffer_create(nullptr, 16, &untouched) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_buffer_create(context.get(), 16, nullptr) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_buffer_wrap_vulkan(nullptr, &size, 0, 16, &untouched) == KVC_ERROR_NULL_POINTER);
  CHECK(untouched == reinterpret_cast<kvc_buffer*>(0x1));
  CHECK(kvc_buffer_size(nullptr, &size) == KVC_ERROR_NULL_POINTER);
  CHECK(size == 7);
  CHECK(kvc_buffer_write(nullptr, 0, 1, in.k.data()) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_buffer_read(nullptr, 0, 1, host_out.data()) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_cache_append_device(nullptr, 0, 1, desc.dtype, k, v) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_attend_device(nullptr, 0, 1, desc.dtype, q, out, none) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_decode_device(nullptr, 0, desc.dtype, k, v, q, out) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_step_begin(nullptr) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_step_begin_commands(nullptr, &size) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_step_end(nullptr) == KVC_ERROR_NULL_POINTER);
  CHECK(kvc_step_wait(nullptr, 0) == KVC_ERROR_NULL_POINTER);
  kvc_buffer_destroy(nullptr);
}

TEST_CASE("engine path on the CPU: steps in order only, refused calls inside a step, what needs Vulkan") {
  test::ContextPtr context = test::make_context(KVC_BACKEND_CPU);
  CHECK(kvc_step_wait(context.get(), 0) == KVC_OK);  // nothing ever submitted
  CHECK(kvc_step_end(context.get()) == KVC_ERROR_BAD_STATE);
  // An application's command buffer or VkBuffer means nothing to the CPU backend; the handles
  // passed are not Vulkan objects and must not be touched.
  uint64_t not_a_vulkan_object = 0;
  CHECK(kvc_step_begin_commands(context.get(), &not_a_vulkan_object) == KVC_ERROR_UNSUPPORTED);
  CHECK(kvc_step_end(context.get()) == KVC_ERROR_BAD_STATE);  // the refused begin opened no step
  kvc_buffer* untouched = reinterpret_cast<kvc_buffer*>(0x1);
  CHECK(kvc_buffer_wrap_vulkan(context.get(), &not_a_vulkan_object, 0, 64, &untouched) == KVC_ERROR_UNSUPPORTED);
  CHECK(untouched == reinterpret_cast<kvc_buffer*>(0x1));
  CHECK(not_a_vulkan_object == 0);
  test::check_refusals_inside_step(context.get());
}

}  // namespace kvc
