// Vulkan batched decode: attention_decode_batch and attention_merge_batch over groups of caches,
// each cache's buffers an element of the kernels' binding arrays (ops/batch_dispatch_vulkan.h).
#include <algorithm>
#include <cmath>
#include <utility>

#include "ops/attention_batch.h"
#include "ops/batch_dispatch_vulkan.h"
#include "ops/decode_split_vulkan.h"
#include "ops/rotated_reads_vulkan.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kDecodeArrays = 4;    // attention_decode_batch's per-cache bindings: Q, K, V, positions
constexpr uint32_t kDecodeSingles = 3;   // its turns, partials and table
constexpr uint32_t kCacheFields = 4;     // the table's record per cache (the shaders' CACHE_FIELDS)

struct DecodeBatchPush {
  uint32_t table_base, group_size;
  float scale;
};
struct MergeBatchPush {
  uint32_t table_base, num_q_heads;
};

// A dispatch's caches, as indices into the entries, and where its table starts.
struct DispatchGroup {
  std::vector<size_t> entries;
  uint32_t table_base = 0;
  uint32_t total_splits = 0;
};

// Appends the group's table (attention_decode_batch's layout) to `table`: per cache its slots,
// slot stride, splits and first partial row, then per split its cache and the cache's split.
// Splits go to caches in proportion to their tiles, about kDecodeTargetGroups workgroups in
// all as for one cache, and a cache's share split as one cache's budget is (decode_split_count:
// at least one split, none empty).
void plan_group(const std::vector<DecodeEntry>& entries, uint32_t caches_per_dispatch, DispatchGroup& group,
                std::vector<uint32_t>& table) {
  const AttentionShape& shape = entries[group.entries.front()].shape;
  const DecodeBlocks blocks = decode_blocks(shape);
  uint64_t group_tiles = 0;
  for (size_t index : group.entries) group_tiles += decode_tiles(entries[index].shape, blocks);
  const uint64_t budget = decode_split_budget(shape, blocks);
  group.table_base = static_cast<uint32_t>(table.size());
  table.resize(table.size() + size_t(kCacheFields) * caches_per_dispatch, 0u);
  std::vector<uint32_t> splits_of_cache;
  for (uint32_t cache = 0; cache < group.entries.size(); ++cache) {
    const AttentionShape& cache_shape = entries[group.entries[cache]].shape;
    const uint32_t tiles = decode_tiles(cache_shape, blocks);
    const uint32_t splits = decode_split_count(tiles, static_cast<uint32_t>(std::max<uint64_t>(1, budget * tiles / group_tiles)));
    uint32_t* record = &table[group.table_base + kCacheFields * cache];
    record[0] = cache_shape.num_slots;
    record[1] = cache_shape.slot_stride;
    record[2] = splits;
    record[3] = group.total_splits * shape.num_q_heads;
    group.total_splits += splits;
    splits_of_cache.push_back(splits);
  }
  for (uint32_t cache = 0; cache < group.entries.size(); ++cache)
    for (uint32_t split = 0; split < splits_of_cache[cache]; ++split) table.insert(table.end(), {cache, split});
}

// The decode kernel's per-cache bindings. Positions are bound whole, as attention_decode binds
// them (rope_bindings).
std::vector<vk::BufferSlice> decode_arrays(const std::vector<DecodeEntry>& entries, const DispatchGroup& group,
                                           uint32_t caches_per_dispatch) {
  return binding_arrays<DecodeEntry>(entries, group.entries, caches_per_dispatch,
                                     {[](const DecodeEntry& entry) { return slice(entry.args.q); },
                                      [](const DecodeEntry& entry) { return slice(entry.args.k); },
                                      [](const DecodeEntry& entry) { return slice(entry.args.v); },
                                      [](const DecodeEntry& entry) { return slice(View{entry.args.positions.tensor, 0}); }});
}

}  // namespace

uint32_t attention_batch_caches_per_dispatch(Backend& backend) {
  return batch_caches_per_dispatch(backend, kDecodeArrays, kDecodeSingles);
}

void attention_batch_vulkan(Backend& backend, const std::vector<DecodeEntry>& entries) {
  const AttentionShape& shape = entries.front().shape;
  const uint32_t dim = shape.head_dim;
  uint32_t caches_per_dispatch = attention_batch_caches_per_dispatch(backend);
  // A group's partials, a row per query head and split (at most the split budget plus one split
  // per cache: plan_group), must fit one binding.
  const uint64_t row_bytes = uint64_t(shape.num_q_heads) * (dim + 2) * sizeof(float);
  const uint64_t rows_fit = backend.is_cpu() ? 0 : backend.tensor_limit().bytes / row_bytes;
  const uint64_t split_budget = decode_split_budget(shape, decode_blocks(shape));
  caches_per_dispatch = rows_fit > split_budget ? uint32_t(std::min<uint64_t>(caches_per_dispatch, rows_fit - split_budget)) : 0;
  if (caches_per_dispatch < 2) {
    for (const DecodeEntry& entry : entries) attention_vulkan(backend, entry.shape, entry.args);
    return;
  }
  const bool f16 = shape.dtype == Dtype::F16;

  // Caches that store keys rotated and those rotated as read take different kernels (the
  // shader's KEYS_ROTATED): one group list each, in the entries' order.
  std::vector<DispatchGroup> groups;
  for (bool keys_rotated : {true, false}) {
    std::vector<size_t> members;
    for (size_t index = 0; index < entries.size(); ++index)
      if (entries[index].shape.keys_rotated == keys_rotated) members.push_back(index);
    for (std::vector<size_t>& group : dispatch_groups(members, caches_per_dispatch)) groups.push_back({std::move(group)});
  }
  // A group of one cache takes the single-cache kernels: the split table's upload and barrier
  // cost it more than the binding arrays save (13 us at B = 1, L = 4K on the H100).
  std::vector<DispatchGroup> batched;
  for (DispatchGroup& group : groups) {
    if (group.entries.size() > 1) {
      batched.push_back(std::move(group));
      continue;
    }
    const DecodeEntry& single = entries[group.entries.front()];
    attention_vulkan(backend, single.shape, single.args);
  }
  if (batched.empty()) return;
  groups = std::move(batched);
  std::vector<uint32_t> table;
  size_t partial_rows = 0;
  for (DispatchGroup& group : groups) {
    plan_group(entries, caches_per_dispatch, group, table);
    partial_rows = std::max(partial_rows, size_t(group.total_splits) * shape.num_q_heads);
  }

  Tensor& table_tensor = backend.scratch(ScratchId::AttentionBatchTable, table.size() * sizeof(uint32_t));
  backend.upload(table.data(), table.size() * sizeof(uint32_t), table_tensor, 0);
  // The groups share the partials: each group's first dispatch writes what the one before's merge
  // read, so the recorder orders them one after another.
  Tensor& partials = backend.scratch(ScratchId::AttentionPartials, partial_rows * (dim + 2) * sizeof(float));
  Tensor& lse = backend.scratch(ScratchId::AttentionLse, size_t(caches_per_dispatch) * shape.num_q_heads * sizeof(float));
  const DecodeBlocks blocks = decode_blocks(shape);
  const uint32_t group_size = shape.num_q_heads / shape.num_kv_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  vk::Recorder& recorder = backend.recorder();
  for (const DispatchGroup& group : groups) {
    const DecodeEntry& first = entries[group.entries.front()];
    const RopeBindings rope = rope_bindings(shape.rope, first.args.positions, first.args.turn_table, first.args.k);
    std::vector<vk::BufferSlice> decode_buffers = decode_arrays(entries, group, caches_per_dispatch);
    decode_buffers.insert(decode_buffers.end(), {rope.turns, slice(view(partials)), slice(view(table_tensor))});
    const DecodeBatchPush push{group.table_base, group_size, scale};
    recorder.dispatch({"attention_decode_batch", kDecodeArrays + kDecodeSingles, sizeof(DecodeBatchPush),
                       {kDecodeWorkgroup, dim, blocks.group_block, f16, rope.style, rope.rotary_dims, false,
                        first.shape.keys_rotated, decode_builtin_trig(backend, first.shape), caches_per_dispatch},
                       {caches_per_dispatch, caches_per_dispatch, caches_per_dispatch, caches_per_dispatch}},
                      decode_buffers, &push, group.total_splits, shape.num_kv_heads, blocks.head_blocks);

    std::vector<vk::BufferSlice> merge_buffers{slice(view(partials))};
    const std::vector<vk::BufferSlice> outputs =
        binding_arrays<DecodeEntry>(entries, group.entries, caches_per_dispatch, {[](const DecodeEntry& entry) { return slice(entry.args.out); }});
    merge_buffers.insert(merge_buffers.end(), outputs.begin(), outputs.end());
    merge_buffers.insert(merge_buffers.end(), {slice(view(lse)), slice(view(table_tensor))});
    const MergeBatchPush merge{group.table_base, shape.num_q_heads};
    recorder.dispatch({"attention_merge_batch", 4, sizeof(MergeBatchPush), {kMergeWorkgroup, dim, f16, caches_per_dispatch},
                       {1, caches_per_dispatch}},
                      merge_buffers, &merge, shape.num_q_heads, static_cast<uint32_t>(group.entries.size()),
                      merge_dim_blocks(dim));
  }
}

}  // namespace kvc::ops
