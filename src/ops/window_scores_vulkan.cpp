// Vulkan window scores: queries rotated and scaled once (rope op); per-row softmax partials from
// a pass over the keys (window_logits_coopmat on cooperative matrices where the context's path
// allows and the shape qualifies, else the register-blocked f32 SIMT window_logits), which also
// writes the logits of every (query head, window query, prefix slot) unless a second pass
// replaces them; the partials and the window's own causal logits merged into each row's max and
// 1 / sum (window_softmax). Then either, on cooperative matrices without hits and with a kv
// head's rows in one workgroup, a second pass over the keys that sums each slot's probabilities
// (the logits are never written: 128 MiB a layer at the kvc-bench shape), or for hits each
// row's rank-K boundary (window_hit_threshold) and one pass over the logits that sums the
// probabilities per kv head and counts the hits (window_sum).
#include <algorithm>
#include <string>

#include "ops/radix_select_vulkan.h"
#include "ops/rotated_reads_vulkan.h"
#include "ops/window_scores.h"
#include "vulkan/device.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kLogitsWorkgroup = 256;  // window_logits' 16 x 16 threads: 128 rows x 128 slots a tile
constexpr uint32_t kLogitsRowTile = 128;
constexpr uint32_t kLogitsSlotTile = 128;
// window_logits_coopmat: the same row tiles, 8 subgroups of 32 lanes with 16 rows each, and
// per workgroup a run of 64-slot steps, so that about kCoopmatWorkgroups workgroups share the
// prefix (each makes its queries A matrices once and loads a step's keys during the last
// step's product). Its shared memory (coopmat_shared_bytes) is 38 KiB at head_dim 128, within
// the 48 KiB NVIDIA's Vulkan driver offers.
constexpr uint32_t kCoopmatSubgroups = 8;
constexpr uint32_t kCoopmatRows = 16;        // rows per subgroup (the matrix size)
constexpr uint32_t kCoopmatSlotStep = 64;    // the shader's SLOT_STEP
constexpr uint32_t kCoopmatChunkSlots = 32;  // the shader's CHUNK_SLOTS: logits leave 32 slots at a time
constexpr uint32_t kCoopmatMaxHeadDim = 128;
constexpr uint32_t kCoopmatScratchItems = kCoopmatRows * (kCoopmatChunkSlots / 4 + 1);
constexpr uint32_t kCoopmatWorkgroups = 256;  // about two per SM on large GPUs (H100: 256 58.9 us a pass, 512 63.6, 1024 70.6)
static_assert(kCoopmatSubgroups * kCoopmatRows == kLogitsRowTile, "both logits kernels take the same row tiles");
constexpr uint32_t kSoftmaxWorkgroup = 64;  // merges a row's partials: 256 at the 32K prefix on SIMT, 32 on cooperative matrices
constexpr uint32_t kSumWorkgroup = 256;

// window_logits_coopmat's OUTPUT.
enum class CoopmatOutput : uint32_t { Logits = 0, Statistics = 1, Sums = 2 };

struct WindowPush {
  uint32_t num_prefix, slot_stride, window, group_size, num_q_heads;
  uint32_t num_tiles;        // softmax partials per row: slot tiles, or on cooperative matrices workgroups along x
  uint32_t steps_per_group;  // window_logits_coopmat's slot steps per workgroup
};

// The larger of the row tile's queries ([row][head_dim / 8 + 1] 16-byte items) and a step's keys
// ([slot][head_dim / 8 + 1]) beside the subgroups' scratches (16 rows x (32 slots / 4 + 1) items
// each), then the row tile's statistics (8 bytes a row) and the subgroups' column sums of a step
// (4 bytes a slot each), which OUTPUT_SUMS uses.
uint32_t coopmat_shared_bytes(uint32_t head_dim) {
  const uint32_t row_items = head_dim / 8 + 1;
  return 16 * std::max(kLogitsRowTile * row_items, kCoopmatSlotStep * row_items + kCoopmatSubgroups * kCoopmatScratchItems) +
         kLogitsRowTile * 8 + kCoopmatSubgroups * kCoopmatSlotStep * 4;
}

// With RoPE window_logits_coopmat reads the prefix's keys rotated once by the rope op.
RotatedKeys rotated_prefix(const WindowScoresShape& shape) { return {shape.num_kv_heads, shape.num_prefix(), shape.head_dim}; }

}  // namespace

bool window_logits_on_cooperative_matrices(Backend& backend, const WindowScoresShape& shape) {
  if (backend.is_cpu() || shape.dtype != Dtype::F16 || shape.head_dim % kCoopmatRows != 0 || shape.head_dim > kCoopmatMaxHeadDim)
    return false;
  const vk::Device& device = backend.device();
  return device.matrix_path() == vk::MatrixPath::Cooperative &&
         device.fits_workgroup(kCoopmatSubgroups * vk::kCooperativeSubgroupSize, coopmat_shared_bytes(shape.head_dim)) &&
         (!shape.rope.enabled() || rotated_prefix(shape).possible(backend));
}

void window_scores_vulkan(Backend& backend, const WindowScoresShape& shape, const WindowScoresArgs& args) {
  vk::Recorder& recorder = backend.recorder();
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  const uint32_t dim = shape.head_dim;
  const uint32_t prefix = shape.num_prefix();
  const uint32_t rows = shape.num_q_heads * shape.window;
  const bool f16 = shape.dtype == Dtype::F16;
  const bool count_hits = shape.hit_k > 0;
  const bool cooperative = window_logits_on_cooperative_matrices(backend, shape);
  const uint32_t row_tiles = group_count(uint64_t(group) * shape.window, kLogitsRowTile);
  // On cooperative matrices a kv head's rows in one workgroup sum their probabilities in a second
  // pass over the keys; hits need the logits (each row's rank-K bound), and so do sums that
  // several workgroups would add.
  const bool sums_in_second_pass = cooperative && !count_hits && row_tiles == 1;
  const uint64_t logit_bytes = size_product({rows, prefix, sizeof(float)});
  if (!sums_in_second_pass)
    require_within(logit_bytes, backend.tensor_limit(), "shorten the window or the prompt", [&] {
      return "window scores of " + std::to_string(shape.num_q_heads) + " heads x " + std::to_string(shape.window) + " queries x " +
             std::to_string(prefix) + " slots x 4 bytes";
    });
  const RopeBindings rope = rope_bindings(shape.rope, args.positions, args.turn_table, args.k);
  const uint32_t rope_style = rope.style, rotary_dims = rope.rotary_dims;
  const vk::BufferSlice positions = rope.positions, turns = rope.turns;

  Tensor& q_rot = backend.scratch(ScratchId::WindowQuery, size_t(shape.window) * shape.num_q_heads * dim * 4);
  rotate_queries(backend, {shape.window, shape.num_q_heads, dim, shape.dtype, shape.rope}, args.q, args.positions, prefix,
                 args.turn_table, q_rot);

  const uint32_t slot_steps = group_count(prefix, kCoopmatSlotStep);
  const uint32_t steps_per_group =
      cooperative ? group_count(uint64_t(slot_steps) * shape.num_kv_heads * row_tiles, kCoopmatWorkgroups) : 0;
  const uint32_t num_tiles = cooperative ? group_count(slot_steps, steps_per_group) : group_count(prefix, kLogitsSlotTile);
  const vk::BufferSlice logits =
      sums_in_second_pass ? slice(args.cumulative) : slice(view(backend.scratch(ScratchId::WindowLogits, logit_bytes)));
  Tensor& partials = backend.scratch(ScratchId::WindowPartials, size_t(rows) * num_tiles * 8);
  Tensor& row_stats = backend.scratch(ScratchId::WindowRowStats, size_t(rows) * 8);

  const WindowPush push{prefix, shape.slot_stride, shape.window, group, shape.num_q_heads, num_tiles, steps_per_group};
  // window_logits_coopmat's keys: the cache's, or with RoPE the prefix's rotated once.
  View coopmat_keys = args.k;
  WindowPush coopmat_push = push;
  if (cooperative && rope_style != 0) {
    coopmat_keys = rotate_keys(backend, rotated_prefix(shape), shape.slot_stride, shape.dtype, shape.rope, args.k, args.positions,
                               args.turn_table);
    coopmat_push.slot_stride = rotated_prefix(shape).slot_stride(backend.device());
  }
  const std::vector<uint32_t> key_constants{dim, f16, rope_style, rotary_dims};
  auto constants = [&](uint32_t workgroup) {
    std::vector<uint32_t> all{workgroup};
    all.insert(all.end(), key_constants.begin(), key_constants.end());
    return all;
  };
  // The passes that write no logits do their rows' work in registers where the device allows
  // (the shader's header; H100, SnapKV's two passes: 59 -> 50 us a layer each). Logits written
  // from registers leave in 32-byte pieces of 8 rows (213 us a layer against 102 through the
  // scratch), so the logits pass keeps the shared-memory route.
  const bool rows_in_registers = cooperative && vk::rows_in_registers(backend.device());
  auto coopmat_pass = [&](CoopmatOutput output, const vk::BufferSlice& out, const vk::BufferSlice& rows_out) {
    recorder.dispatch({"window_logits_coopmat", 4, sizeof(WindowPush),
                       {kCoopmatSubgroups * vk::kCooperativeSubgroupSize, dim, uint32_t(output),
                        rows_in_registers && output != CoopmatOutput::Logits}},
                      {slice(view(q_rot)), slice(coopmat_keys), out, rows_out}, &coopmat_push, num_tiles, shape.num_kv_heads, row_tiles);
  };
  if (cooperative)
    coopmat_pass(sums_in_second_pass ? CoopmatOutput::Statistics : CoopmatOutput::Logits, logits, slice(view(partials)));
  else
    recorder.dispatch({"window_logits", 6, sizeof(WindowPush), constants(kLogitsWorkgroup)},
                      {slice(view(q_rot)), slice(args.k), positions, turns, logits, slice(view(partials))}, &push, num_tiles,
                      shape.num_kv_heads, row_tiles);
  recorder.dispatch({"window_softmax", 6, sizeof(WindowPush), constants(kSoftmaxWorkgroup)},
                    {slice(view(q_rot)), slice(args.k), positions, turns, slice(view(partials)), slice(view(row_stats))}, &push,
                    group_count(rows, 1));
  if (sums_in_second_pass) {
    coopmat_pass(CoopmatOutput::Sums, slice(args.cumulative), slice(view(row_stats)));
    return;
  }
  Tensor& bounds = backend.scratch(ScratchId::WindowHitBounds, count_hits ? size_t(rows) * 8 : 8);
  if (count_hits) {
    const uint32_t threshold_push[] = {prefix, shape.hit_k};
    const uint32_t threads = radix_select_workgroup(backend.device(), "window_hit_threshold");
    recorder.dispatch({"window_hit_threshold", 2, sizeof(threshold_push), {threads}}, {logits, slice(view(bounds))}, threshold_push,
                      group_count(rows, 1));
  }
  recorder.dispatch({"window_sum", 5, sizeof(WindowPush), {kSumWorkgroup, count_hits}},
                    {logits, slice(view(row_stats)), slice(args.cumulative), slice(view(bounds)), slice_or(args.hits, args.cumulative)},
                    &push, group_count(prefix, kSumWorkgroup), shape.num_kv_heads);
}

}  // namespace kvc::ops
