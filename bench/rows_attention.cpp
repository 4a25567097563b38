// kvc-bench rows for attention: decode (flash-decoding; without and with RoPE) and a causal prefill chunk of 2048
// queries, each at three cache lengths (4K, 32K, 128K), in the shape the issues fix (32 q /
// 8 kv heads, d = 128), and decode_sweep: long-context decode over several lengths and slot
// strides, each point timed on several allocations of its buffers (issue 15: at 128K the same
// shape measured 193 to 751 us from one allocation to the next). The prefill rows run on the
// context's matrix path (the report's header).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_rows.h"

namespace kvc::bench {
namespace {

double time_buffers(Backend& backend, const Timing& timing, const ops::AttentionShape& shape, const AttentionBuffers& b) {
  const ops::AttentionArgs args = b.args();
  return median_us(backend, timing, [&] { ops::attention(backend, shape, args); });
}

std::string shape_text(const ops::AttentionShape& shape) {
  return "L=" + std::to_string(shape.num_slots) + " n=" + std::to_string(shape.num_queries) + " qh=" +
         std::to_string(shape.num_q_heads) + " kvh=" + std::to_string(shape.num_kv_heads) + " d=" + std::to_string(shape.head_dim);
}

Row time_attention(Backend& backend, const Timing& timing, const ops::AttentionShape& shape, const char* name) {
  Row row;
  row.name = name;
  row.shape = shape_text(shape);
  row.dtype = dtype_name(shape.dtype);
  row.median_us = time_buffers(backend, timing, shape, allocate_attention(backend, shape));
  row.bytes = attention_bytes(shape);
  return row;
}

// One point of the sweep: `allocations` sets of buffers, each kept while the next is made (so
// each lands somewhere new), each timed alone, twice in a row: a slow first timing and a fast
// second tells a state the GPU left (clocks after the host's input preparation) from a slow
// allocation. Both times of each allocation go to stderr; the row takes the second.
Row time_allocations(Backend& backend, const Timing& timing, const ops::AttentionShape& shape, int allocations) {
  std::vector<AttentionBuffers> kept;
  std::vector<double> times;
  std::string both;
  for (int i = 0; i < allocations; ++i) {
    kept.push_back(allocate_attention(backend, shape));
    const double first = time_buffers(backend, timing, shape, kept.back());
    times.push_back(time_buffers(backend, timing, shape, kept.back()));
    both += " " + std::to_string(int(first)) + "/" + std::to_string(int(times.back()));
  }
  std::fprintf(stderr, "kvc-bench: decode_sweep %s %s: first/second us per allocation:%s\n", shape_text(shape).c_str(),
               dtype_name(shape.dtype), both.c_str());
  std::sort(times.begin(), times.end());
  Row row;
  row.name = "decode_sweep";
  row.shape = shape_text(shape) + " stride=" + std::to_string(shape.slot_stride) + " allocs=" + std::to_string(allocations);
  row.dtype = dtype_name(shape.dtype);
  row.median_us = times[times.size() / 2];
  row.min_us = times.front();
  row.max_us = times.back();
  row.bytes = attention_bytes(shape);
  return row;
}

}  // namespace

AttentionBuffers allocate_attention(Backend& backend, const ops::AttentionShape& shape) {
  const size_t elem = dtype_size(shape.dtype);
  const size_t kv_bytes = size_t(shape.num_kv_heads) * shape.slot_stride * shape.head_dim * elem;
  const size_t q_bytes = size_t(shape.num_queries) * shape.num_q_heads * shape.head_dim * elem;
  AttentionBuffers buffers;
  buffers.q = make_random(backend, q_bytes, shape.dtype);
  buffers.k = make_random(backend, kv_bytes, shape.dtype);
  buffers.v = make_random(backend, kv_bytes, shape.dtype);
  buffers.positions = std::make_unique<Tensor>(backend, size_t(shape.num_kv_heads) * shape.slot_stride * 4);
  buffers.out = std::make_unique<Tensor>(backend, q_bytes);
  if (shape.rope.enabled()) {  // each kv head's slots at positions 0, 1, 2, ...
    std::vector<int32_t> positions(size_t(shape.num_kv_heads) * shape.slot_stride);
    for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int32_t>(i % shape.slot_stride);
    const std::vector<uint32_t> turns = ops::rope_turn_table(shape.rope);
    buffers.turn_table = std::make_unique<Tensor>(backend, turns.size() * 4);
    backend.begin();
    backend.upload(positions.data(), positions.size() * 4, *buffers.positions, 0);
    backend.upload(turns.data(), turns.size() * 4, *buffers.turn_table, 0);
    backend.submit();
  }
  return buffers;
}

ops::AttentionArgs AttentionBuffers::args() const {
  return {view(*q), view(*k), view(*v), view(*positions), turn_table ? view(*turn_table) : View{}, view(*out)};
}

double attention_bytes(const ops::AttentionShape& shape) {
  const size_t elem = dtype_size(shape.dtype);
  return 2.0 * shape.num_kv_heads * shape.num_slots * shape.head_dim * elem +  // K and V, once
         2.0 * shape.num_queries * shape.num_q_heads * shape.head_dim * elem;  // Q in, O out
}

void add_attention_rows(Backend& backend, const Timing& timing, const RowOptions& options, Report& report) {
  const bool quick = options.quick;
  ops::AttentionShape shape;
  shape.num_q_heads = 32;
  shape.num_kv_heads = 8;
  shape.head_dim = 128;
  const std::vector<uint32_t> lengths = quick ? std::vector<uint32_t>{4096} : std::vector<uint32_t>{4096, 32768, 131072};
  for (Dtype dtype : {Dtype::F16, Dtype::F32}) {
    shape.dtype = dtype;
    for (uint32_t length : lengths) {
      if (!options.wants("decode_attention")) break;
      shape.num_queries = 1;
      shape.num_slots = shape.slot_stride = length;
      record(report, time_attention(backend, timing, shape, "decode_attention"));
    }
  }
  // With RoPE (NeoX, all dims), f16: keys are stored before RoPE, so the decode kernel rotates
  // every key it reads; this row prices that beside decode_attention (an engine's caches run it).
  shape.dtype = Dtype::F16;
  shape.num_queries = 1;
  shape.rope = {KVC_ROPE_NEOX, shape.head_dim, 10000.0};
  for (uint32_t length : lengths) {
    if (!options.wants("decode_attention_rope")) break;
    shape.num_slots = shape.slot_stride = length;
    record(report, time_attention(backend, timing, shape, "decode_attention_rope"));
  }
  shape.rope = {};
  // The sweep: lengths from 64K to 128K at three slot strides (the length, 64 slots more, twice
  // the length).
  const std::vector<uint32_t> sweep_lengths = quick ? std::vector<uint32_t>{4096} : std::vector<uint32_t>{65536, 98304, 131072};
  for (Dtype dtype : {Dtype::F16, Dtype::F32}) {
    shape.dtype = dtype;
    shape.num_queries = 1;
    for (uint32_t length : sweep_lengths)
      for (uint32_t stride : {length, length + 64, 2 * length}) {
        if (!options.wants("decode_sweep", "L=" + std::to_string(length))) continue;
        shape.num_slots = length;
        shape.slot_stride = stride;
        record(report, time_allocations(backend, timing, shape, quick ? 2 : 5));
      }
  }
  shape.dtype = Dtype::F16;
  shape.num_queries = quick ? 128 : 2048;
  const std::vector<uint32_t> cached = quick ? std::vector<uint32_t>{1024} : std::vector<uint32_t>{32768, 4096, 131072};
  for (uint32_t length : cached) {
    if (!options.wants("prefill_attention")) break;
    shape.num_slots = shape.slot_stride = length + shape.num_queries;
    record(report, time_attention(backend, timing, shape, "prefill_attention"));
  }
  // With RoPE (NeoX, all dims), at the first length: the cooperative-matrix kernel reads keys
  // rotated once per call by the rope op, or with KVC_COOPMAT_ROPE=load rotates them as it
  // stages them; this row decides between the two.
  if (!options.wants("prefill_attention_rope")) return;
  shape.num_slots = shape.slot_stride = cached.front() + shape.num_queries;
  shape.rope = {KVC_ROPE_NEOX, shape.head_dim, 10000.0};
  record(report, time_attention(backend, timing, shape, "prefill_attention_rope"));
}

}  // namespace kvc::bench
