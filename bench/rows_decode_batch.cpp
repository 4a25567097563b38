// kvc-bench rows for batched decode (kvc_attend_batch_device's op): one decode step of B caches
// of L = 4K each (32 q / 8 kv heads, d = 128, f16, keys stored rotated as FULL stores them),
// each cache in buffers of its own, for B = 1, 8, 32: decode_batch through the batched kernels
// and decode_batch_per_cache through one attention op per cache (KVC_BATCH_DECODE=per_cache),
// what an engine ran before. Issue 15's target: B = 32 at >= 80% of the copy bandwidth.
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_rows.h"
#include "ops/attention_batch.h"

namespace kvc::bench {
namespace {

// KVC_BATCH_DECODE=per_cache for the guard's lifetime when asked for, else unset (an inherited
// setting would make the batched rows time the per-cache path).
class PerCacheSetting {
 public:
  explicit PerCacheSetting(bool per_cache) {
    if (per_cache) setenv("KVC_BATCH_DECODE", "per_cache", 1);
    else unsetenv("KVC_BATCH_DECODE");
  }
  ~PerCacheSetting() { unsetenv("KVC_BATCH_DECODE"); }
};

Row time_batch(Backend& backend, const Timing& timing, const ops::AttentionShape& shape, uint32_t caches, bool per_cache) {
  std::vector<AttentionBuffers> buffers;
  std::vector<ops::DecodeEntry> entries;
  for (uint32_t cache = 0; cache < caches; ++cache) {
    buffers.push_back(allocate_attention(backend, shape));
    entries.push_back({shape, buffers.back().args()});
  }
  const PerCacheSetting setting(per_cache);
  Row row;
  row.name = per_cache ? "decode_batch_per_cache" : "decode_batch";
  row.shape = "B=" + std::to_string(caches) + " L=" + std::to_string(shape.num_slots) + " qh=" + std::to_string(shape.num_q_heads) +
              " kvh=" + std::to_string(shape.num_kv_heads) + " d=" + std::to_string(shape.head_dim) + " full";
  row.dtype = dtype_name(shape.dtype);
  row.median_us = median_us(backend, timing, [&] { ops::attention_batch(backend, entries); });
  row.bytes = caches * attention_bytes(shape);
  return row;
}

}  // namespace

void add_decode_batch_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report) {
  ops::AttentionShape shape;
  shape.num_q_heads = 32;
  shape.num_kv_heads = 8;
  shape.head_dim = 128;
  shape.num_queries = 1;
  shape.num_slots = shape.slot_stride = options.quick ? 256 : 4096;
  shape.dtype = Dtype::F16;
  shape.rope = {KVC_ROPE_NEOX, shape.head_dim, 10000.0};
  shape.keys_rotated = true;
  for (bool per_cache : {false, true}) {
    if (!options.wants(per_cache ? "decode_batch_per_cache" : "decode_batch")) continue;
    for (uint32_t caches : {1u, 8u, 32u}) record(report, time_batch(backend, timing, shape, caches, per_cache));
  }
}

}  // namespace kvc::bench
