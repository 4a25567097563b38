// Batched append on Vulkan (append_rows_batch) on fresh random inputs: every cache's storage
// equal bit for bit to append_rows run per entry on Vulkan (rotated keys included: one kernel
// body, one arithmetic) and, where no key is rotated, to the CPU reference (a copy), the
// untouched poison included. Batches of 1, 3 and more entries than two dispatch groups hold
// (a group of one left over at the end), caches of odd slot strides taking chunks of 1 to 300
// tokens at odd slots, chunks that wrap a ring (two entries of one cache, the second reading
// from its source_token on), keys stored rotated beside keys stored as they come in one
// batch, f32 and f16, without RoPE, NeoX and partial interleaved; the batched kernel and the
// per-entry fallback (KVC_BATCH_DECODE=per_cache).
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "ops/append_rows_batch.h"
#include "support/selection_support.h"

namespace kvc {
namespace {

// One cache's chunk: where it lands (from wrap_after on, at wrap_slot: a ring) and its inputs.
struct CacheChunk {
  uint32_t slot_stride = 0;
  uint32_t num_tokens = 0;
  uint32_t first_slot = 0;
  uint32_t wrap_after = 0;  // num_tokens: no wrap
  uint32_t wrap_slot = 0;
  int32_t first_position = 0;
  bool rotated = false;
  std::vector<unsigned char> k, v;  // [num_tokens][num_kv_heads][head_dim]
};

struct BatchShape {
  uint32_t num_kv_heads, head_dim;
  Dtype dtype;
  ops::RopeParams rope;
};

// Every third cache's chunk wraps its ring (of 300 or 5 tokens: random_chunk).
bool wraps(uint32_t index) { return index % 3 == 2; }

// Cache i of a batch: lengths and slots that are odd or tiny, every other cache's keys stored
// rotated (with RoPE).
CacheChunk random_chunk(const BatchShape& batch, uint32_t index) {
  static const uint32_t tokens[] = {1, 7, 300, 1, 33, 5};
  CacheChunk chunk;
  chunk.num_tokens = tokens[index % 6];
  std::uniform_int_distribution<uint32_t> spare(0, 40);
  chunk.slot_stride = chunk.num_tokens + 1 + 2 * spare(test::rng());
  chunk.wrap_after = chunk.num_tokens;
  if (wraps(index)) {
    // As FAEDKV's window: the chunk starts wrap_after slots before the ring's end and goes on
    // from the ring's start.
    chunk.wrap_after = 1 + uint32_t(test::rng()() % (chunk.num_tokens - 1));
    chunk.wrap_slot = uint32_t(test::rng()() % (chunk.slot_stride - chunk.num_tokens + 1));
    chunk.first_slot = chunk.wrap_slot + chunk.num_tokens - chunk.wrap_after;
  } else {
    chunk.first_slot = uint32_t(test::rng()() % (chunk.slot_stride - chunk.num_tokens + 1));
  }
  chunk.first_position = int32_t(test::rng()() % 3000000);
  chunk.rotated = batch.rope.enabled() && index % 2 == 0;
  std::vector<float> k = test::random_floats(size_t(chunk.num_tokens) * batch.num_kv_heads * batch.head_dim);
  std::vector<float> v = test::random_floats(k.size());
  chunk.k = test::encode(k, batch.dtype);
  chunk.v = test::encode(v, batch.dtype);
  return chunk;
}

// A cache's storage on one backend, poisoned, and the chunk's inputs there.
struct CacheTensors {
  std::unique_ptr<Tensor> k_in, v_in, k, v, positions;
};

// Every cache's K, V and positions after the batch's appends on `backend`, through
// append_rows_batch (`batched`) or append_rows per entry.
std::vector<std::vector<unsigned char>> run(Backend& backend, const BatchShape& batch, const std::vector<CacheChunk>& chunks, bool batched) {
  const size_t row_bytes = batch.head_dim * dtype_size(batch.dtype);
  const std::vector<uint32_t> turns = batch.rope.enabled() ? ops::rope_turn_table(batch.rope) : std::vector<uint32_t>{0, 0};
  auto turn_table = test::tensor_of(backend, turns);
  std::vector<CacheTensors> caches;
  std::vector<ops::AppendEntry> entries;
  for (const CacheChunk& chunk : chunks) {
    const size_t slots = size_t(batch.num_kv_heads) * chunk.slot_stride;
    caches.push_back({test::tensor_of(backend, chunk.k), test::tensor_of(backend, chunk.v), test::make_poisoned(backend, slots * row_bytes),
                      test::make_poisoned(backend, slots * row_bytes), test::make_poisoned(backend, slots * 4)});
    const CacheTensors& cache = caches.back();
    ops::AppendRowsShape shape{batch.num_kv_heads, batch.head_dim, chunk.slot_stride, chunk.first_slot, chunk.wrap_after,
                               chunk.first_position, batch.dtype};
    if (chunk.rotated) shape.rope = batch.rope;
    const ops::AppendRowsArgs args{view(*cache.k_in), view(*cache.v_in), view(*cache.k), view(*cache.v), view(*cache.positions),
                                   view(*turn_table)};
    entries.push_back({shape, args});
    if (chunk.wrap_after == chunk.num_tokens) continue;
    shape.first_slot = chunk.wrap_slot;
    shape.num_tokens = chunk.num_tokens - chunk.wrap_after;
    shape.source_token = chunk.wrap_after;
    shape.first_position += int32_t(chunk.wrap_after);
    entries.push_back({shape, args});
  }
  backend.begin();
  if (batched) ops::append_rows_batch(backend, entries);
  else
    for (const ops::AppendEntry& entry : entries) ops::append_rows(backend, entry.shape, entry.args);
  backend.submit();
  std::vector<std::vector<unsigned char>> stored;
  for (const CacheTensors& cache : caches) {
    stored.push_back(test::read_tensor(backend, *cache.k, cache.k->bytes()));
    stored.push_back(test::read_all(backend, {cache.v.get(), cache.positions.get()}));
  }
  return stored;
}

void check_batch(uint32_t caches, const BatchShape& batch) {
  std::vector<CacheChunk> chunks;
  for (uint32_t index = 0; index < caches; ++index) chunks.push_back(random_chunk(batch, index));
  const std::vector<std::vector<unsigned char>> reference = run(test::cpu_backend(), batch, chunks, true);
  CHECK(reference == run(test::cpu_backend(), batch, chunks, false));
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  const std::vector<std::vector<unsigned char>> per_entry = run(*gpu, batch, chunks, false);
  for (bool fallback : {false, true}) {
    const test::EnvironmentSetting setting("KVC_BATCH_DECODE", fallback ? "per_cache" : nullptr);
    CHECK((ops::append_rows_batch_entries_per_dispatch(*gpu) == 0) == fallback);
    const std::vector<std::vector<unsigned char>> stored = run(*gpu, batch, chunks, true);
    for (uint32_t index = 0; index < caches; ++index) {
      const CacheChunk& chunk = chunks[index];
      INFO(caches, " caches, cache ", index, ": ", chunk.num_tokens, " tokens at slot ", chunk.first_slot, " of ", chunk.slot_stride,
           " (wrapping after ", chunk.wrap_after, " to ", chunk.wrap_slot, "), kv heads ", batch.num_kv_heads, " head_dim ",
           batch.head_dim, " ", std::string(dtype_name(batch.dtype)), " rope ", batch.rope.style, "/", batch.rope.rotary_dims,
           chunk.rotated ? " rotated" : "", fallback ? ", per entry" : ", batched");
      CHECK(stored[2 * index] == per_entry[2 * index]);
      CHECK(stored[2 * index + 1] == per_entry[2 * index + 1]);
      CHECK(stored[2 * index + 1] == reference[2 * index + 1]);
      if (!chunk.rotated) CHECK(stored[2 * index] == reference[2 * index]);
    }
  }
  CHECK(test::validation_messages() == 0);
}

TEST_CASE("batched append on Vulkan equals append_rows per entry, and the CPU reference where keys are not rotated") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // More entries than two groups take (a wrapping chunk is two), one left for a last group of
  // its own.
  const uint32_t per_dispatch = ops::append_rows_batch_entries_per_dispatch(*gpu);
  REQUIRE(per_dispatch >= 2);  // lavapipe's limits take 6
  uint32_t many = 0, entries = 0;
  while (entries <= 2 * per_dispatch || entries % per_dispatch != 1) entries += wraps(many++) ? 2 : 1;
  for (const BatchShape& batch : {BatchShape{3, 40, Dtype::F32, {}}, BatchShape{2, 8, Dtype::F16, {KVC_ROPE_NEOX, 8, 10000.0}},
                                  BatchShape{8, 128, Dtype::F16, {KVC_ROPE_INTERLEAVED, 64, 500000.0}},
                                  BatchShape{1, 24, Dtype::F32, {KVC_ROPE_NEOX, 24, 10000.0}}})
    for (uint32_t caches : {1u, 3u, many})
      check_batch(caches, batch);
}

}  // namespace
}  // namespace kvc
