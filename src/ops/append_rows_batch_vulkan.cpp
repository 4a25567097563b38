// Vulkan batched append: append_rows_batch over groups of entries, each entry's buffers an
// element of the kernel's binding arrays (ops/batch_dispatch_vulkan.h), each entry's chunk a
// record of one table uploaded for the whole batch.
#include <algorithm>
#include <array>
#include <numeric>

#include "ops/append_rows_batch.h"
#include "ops/append_rows_vulkan.h"
#include "ops/batch_dispatch_vulkan.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kEntryArrays = 5;   // append_rows_batch's per-entry bindings: K, V, K cache, V cache, positions
constexpr uint32_t kEntrySingles = 2;  // its turns and table
constexpr uint32_t kEntryFields = 6;   // the table's record per entry (the shader's ENTRY_FIELDS)

struct AppendBatchPush {
  uint32_t table_base, num_kv_heads;
};

}  // namespace

uint32_t append_rows_batch_entries_per_dispatch(Backend& backend) {
  return batch_caches_per_dispatch(backend, kEntryArrays, kEntrySingles);
}

void append_rows_batch_vulkan(Backend& backend, const std::vector<AppendEntry>& entries) {
  const uint32_t entries_per_dispatch = append_rows_batch_entries_per_dispatch(backend);
  std::vector<size_t> all(entries.size());
  std::iota(all.begin(), all.end(), size_t(0));
  // A group of one entry takes the single-cache kernel, which needs no table (as a group of one
  // cache of attention_batch does). The groups write disjoint slots, so their order is free.
  std::vector<std::vector<size_t>> groups;
  for (std::vector<size_t>& group : dispatch_groups(all, entries_per_dispatch)) {
    if (group.size() > 1) groups.push_back(std::move(group));
    else append_rows_vulkan(backend, entries[group.front()].shape, entries[group.front()].args);
  }
  if (groups.empty()) return;

  std::vector<uint32_t> table;
  std::vector<uint32_t> table_bases;
  for (const std::vector<size_t>& group : groups) {
    table_bases.push_back(static_cast<uint32_t>(table.size()));
    for (size_t index : group) {
      const AppendRowsShape& shape = entries[index].shape;
      const std::array<uint32_t, kEntryFields> record{shape.slot_stride, shape.first_slot, shape.num_tokens,
                                                      static_cast<uint32_t>(shape.first_position), shape.source_token, shape.rope.enabled()};
      table.insert(table.end(), record.begin(), record.end());
    }
  }
  Tensor& table_tensor = backend.scratch(ScratchId::AppendBatchTable, table.size() * sizeof(uint32_t));
  backend.upload(table.data(), table.size() * sizeof(uint32_t), table_tensor, 0);

  // The batch's keys stored rotated share one RoPE (append_rows_batch), so one entry that
  // rotates gives every group its constants and turn table; where none does, the kernel reads
  // no turns and a positions buffer stands in.
  const auto rotating = std::find_if(entries.begin(), entries.end(), [](const AppendEntry& entry) { return entry.shape.rope.enabled(); });
  const AppendEntry& rope_source = rotating != entries.end() ? *rotating : entries.front();
  std::vector<uint32_t> constants = append_row_constants(rope_source.shape);
  constants.push_back(entries_per_dispatch);
  const vk::BufferSlice turns = slice(rotating != entries.end() ? rope_source.args.turn_table : rope_source.args.positions);
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<size_t>& group = groups[g];
    std::vector<vk::BufferSlice> buffers =
        binding_arrays<AppendEntry>(entries, group, entries_per_dispatch,
                                    {[](const AppendEntry& entry) { return slice(entry.args.k); },
                                     [](const AppendEntry& entry) { return slice(entry.args.v); },
                                     [](const AppendEntry& entry) { return slice(entry.args.k_cache); },
                                     [](const AppendEntry& entry) { return slice(entry.args.v_cache); },
                                     [](const AppendEntry& entry) { return slice(entry.args.positions); }});
    buffers.insert(buffers.end(), {turns, slice(view(table_tensor))});
    uint32_t groups_x = 1;
    for (size_t index : group) groups_x = std::max(groups_x, append_row_groups(entries[index].shape));
    const AppendBatchPush push{table_bases[g], entries[group.front()].shape.num_kv_heads};
    const std::vector<uint32_t> array_lengths(kEntryArrays, entries_per_dispatch);
    backend.recorder().dispatch({"append_rows_batch", kEntryArrays + kEntrySingles, sizeof(AppendBatchPush), constants, array_lengths},
                                buffers, &push, groups_x, push.num_kv_heads, static_cast<uint32_t>(group.size()));
  }
}

}  // namespace kvc::ops
