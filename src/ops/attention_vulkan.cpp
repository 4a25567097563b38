// Vulkan attention: flash-decoding (split + merge) for one query, which rotates its query
// itself and writes its logits when scores or logits are asked for (decode_scores turns them
// into scores); for a chunk, queries rotated and scaled once (rope op), the tiled causal kernel (on
// cooperative matrices where the context's path allows and the shape qualifies, else f32
// SIMT), then optionally attention_scores.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/attention.h"
#include "ops/decode_split_vulkan.h"
#include "ops/rotated_reads_vulkan.h"
#include "vulkan/device.h"

namespace kvc::ops {
namespace {

// attention_prefill: a workgroup is row groups x head_dim / 8 threads, 8 rows per row group;
// up to kPrefillThreads threads (at most 16 row groups: small heads would stage too many
// query rows per thread), which keeps its shared memory under 32 KiB for every head_dim.
constexpr uint32_t kPrefillThreads = 128;
constexpr uint32_t kPrefillMaxRowGroups = 16;
constexpr uint32_t kPrefillRowsPerGroup = 8;  // the shader's ROWS
constexpr uint32_t kScoresWorkgroup = 64;
// attention_prefill_coopmat: a subgroup of 32 lanes per 16 rows. 8 subgroups (128-row blocks)
// where the shared memory fits, else 4: each staged key tile serves the block's rows, and
// 64-row blocks would double the keys' and values' L2 traffic.
constexpr uint32_t kCoopmatRows = 16;  // rows per subgroup (the matrix size)
constexpr uint32_t kCoopmatMaxHeadDim = 128;
constexpr uint32_t kCoopmatSubgroupChoices[] = {8, 4};

struct DecodePush {
  uint32_t num_slots, slot_stride, num_splits, partials_per_head, group_size;
  float scale;
};
struct MergePush {
  uint32_t num_splits;
};
struct DecodeScoresPush {
  uint32_t num_slots, group_size;
};
struct ChunkPush {
  uint32_t num_slots, slot_stride, num_queries, group_size, num_q_heads;
};
struct CoopmatPush {
  uint32_t num_slots, key_slot_stride, slot_stride, num_queries, group_size, num_q_heads;
};

// How the cooperative-matrix prefill runs: its softmax in registers (vk::rows_in_registers, the
// shader's header) with 64-key tiles (H100, 2048 queries over 32K: 5.67 ms where 32 took 6.49),
// the scratch no longer holding a tile's logits, or through shared memory with 32-key tiles,
// as the scratch must; and its subgroups a workgroup. The register route first where the
// device allows it, then the shared one, each with the most subgroups whose shared memory
// fits; subgroups 0 when none does.
struct CoopmatPlan {
  bool in_registers;
  uint32_t key_tile;  // the shader's KEY_TILE
  uint32_t subgroups;
};

// The shader's shared memory: key and value tiles ([key][head_dim / 8 + 1] 16-byte items) and
// per subgroup a scratch of 16 rows x (KEY_TILE / 4 + 1) items, or with the softmax in
// registers 16 rows x 4 items (a 16 x 16 f32 block of O).
uint32_t coopmat_shared_bytes(uint32_t head_dim, const CoopmatPlan& plan) {
  const uint32_t tile_items = plan.key_tile * (head_dim / 8 + 1);
  const uint32_t scratch_items = kCoopmatRows * (plan.in_registers ? 4 : plan.key_tile / 4 + 1);
  return 16 * (2 * tile_items + plan.subgroups * scratch_items);
}

CoopmatPlan coopmat_plan(const vk::Device& device, uint32_t head_dim) {
  const CoopmatPlan routes[] = {{true, 64, 0}, {false, 32, 0}};
  for (CoopmatPlan plan : routes) {
    if (plan.in_registers && !vk::rows_in_registers(device)) continue;
    for (uint32_t subgroups : kCoopmatSubgroupChoices) {
      plan.subgroups = subgroups;
      if (device.fits_workgroup(subgroups * vk::kCooperativeSubgroupSize, coopmat_shared_bytes(head_dim, plan))) return plan;
    }
  }
  return {false, 32, 0};
}

// Whether the cooperative-matrix prefill rotates keys as it stages them rather than reading
// them pre-rotated: KVC_COOPMAT_ROPE=load, to measure the two against each other (the kernel's
// header comment); read per call so that a test can run both.
bool rope_on_load() {
  const char* setting = std::getenv("KVC_COOPMAT_ROPE");
  return setting && std::strcmp(setting, "load") == 0;
}

// The keys the rope op rotates once per call for the cooperative-matrix prefill.
RotatedKeys rotated_keys(const AttentionShape& shape) { return {shape.num_kv_heads, shape.num_slots, shape.head_dim}; }

// Causal chunk attention on cooperative matrices. With RoPE the keys are rotated once into f16
// scratch by the rope op (rotate_keys).
void prefill_on_cooperative_matrices(Backend& backend, const AttentionShape& shape, const AttentionArgs& args,
                                     const RopeBindings& rope, Tensor& q_rot, Tensor& lse) {
  const uint32_t dim = shape.head_dim;
  const CoopmatPlan plan = coopmat_plan(backend.device(), dim);
  const bool rotate_on_load = rope.style != 0 && rope_on_load();
  View keys = args.k;
  uint32_t key_slot_stride = shape.slot_stride;
  if (rope.style != 0 && !rotate_on_load) {
    key_slot_stride = rotated_keys(shape).slot_stride(backend.device());
    keys = rotate_keys(backend, rotated_keys(shape), shape.slot_stride, shape.dtype, shape.rope, args.k, args.positions,
                       args.turn_table);
  }
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  const CoopmatPush push{shape.num_slots, key_slot_stride, shape.slot_stride, shape.num_queries, group, shape.num_q_heads};
  backend.recorder().dispatch(
      {"attention_prefill_coopmat", 7, sizeof(CoopmatPush),
       {plan.subgroups * vk::kCooperativeSubgroupSize, dim, rotate_on_load ? rope.style : 0u, rotate_on_load ? rope.rotary_dims : 0u,
        plan.in_registers, plan.key_tile}},
      {slice(view(q_rot)), slice(keys), slice(args.v), slice(args.out), slice(view(lse)), rope.positions, rope.turns}, &push,
      group_count(uint64_t(shape.num_queries) * group, plan.subgroups * kCoopmatRows), shape.num_kv_heads);
}

}  // namespace

bool attention_on_cooperative_matrices(Backend& backend, const AttentionShape& shape) {
  if (backend.is_cpu() || shape.num_queries < 2 || shape.dtype != Dtype::F16 || shape.head_dim % kCoopmatRows != 0 ||
      shape.head_dim > kCoopmatMaxHeadDim)
    return false;
  const vk::Device& device = backend.device();
  if (device.matrix_path() != vk::MatrixPath::Cooperative || coopmat_plan(device, shape.head_dim).subgroups == 0) return false;
  if (rope_style_constant(shape.key_rope()) == 0 || rope_on_load()) return true;
  return rotated_keys(shape).possible(backend);
}

uint32_t decode_splits(const AttentionShape& shape) {
  const DecodeBlocks blocks = decode_blocks(shape);
  return decode_split_count(decode_tiles(shape, blocks), decode_split_budget(shape, blocks));
}

void record_decode_partials(Backend& backend, const AttentionShape& shape, const AttentionArgs& args, uint32_t num_splits,
                            View partials, uint32_t partials_per_head, View logits) {
  const RopeBindings rope = rope_bindings(shape.rope, args.positions, args.turn_table, args.k);
  const DecodeBlocks blocks = decode_blocks(shape);
  const bool with_logits = logits.tensor != nullptr;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)));
  const DecodePush push{shape.num_slots, shape.slot_stride, num_splits, partials_per_head, shape.num_q_heads / shape.num_kv_heads, scale};
  backend.recorder().dispatch(
      {"attention_decode", 7, sizeof(DecodePush),
       {kDecodeWorkgroup, shape.head_dim, blocks.group_block, shape.dtype == Dtype::F16, rope.style, rope.rotary_dims, with_logits,
        shape.keys_rotated, decode_builtin_trig(backend, shape)}},
      {slice(args.q), slice(args.k), slice(args.v), rope.positions, rope.turns, slice(partials), with_logits ? slice(logits) : slice(partials)},
      &push, num_splits, shape.num_kv_heads, blocks.head_blocks);
}

void record_decode_merge(Backend& backend, const AttentionShape& shape, View partials, uint32_t partials_per_head, View out, View lse) {
  const MergePush merge{partials_per_head};
  backend.recorder().dispatch({"attention_merge", 3, sizeof(MergePush), {kMergeWorkgroup, shape.head_dim, shape.dtype == Dtype::F16}},
                              {slice(partials), slice(out), slice(lse)}, &merge, shape.num_q_heads, 1, merge_dim_blocks(shape.head_dim));
}

DecodeSplits record_decode_splits(Backend& backend, const AttentionShape& shape, const AttentionArgs& args) {
  const uint32_t num_splits = decode_splits(shape);
  Tensor& partials = backend.scratch(ScratchId::AttentionPartials, size_t(shape.num_q_heads) * num_splits * (shape.head_dim + 2) * 4);
  // With scores, the decode kernel also writes every (query head, slot) logit, so the scores
  // need not read K again (a second pass over K, RoPE included, cost more than the attention).
  // Logits asked for are written where the caller says, the scratch serving otherwise.
  const bool with_logits = args.scores.tensor != nullptr || args.logits.tensor != nullptr;
  if (with_logits)
    require_within(size_product({shape.num_q_heads, shape.num_slots, sizeof(float)}), backend.tensor_limit(), "", [&] {
      return "decode scores' logits (" + std::to_string(shape.num_q_heads) + " query heads x " + std::to_string(shape.num_slots) + " slots x 4 bytes)";
    });
  const View logits = !with_logits ? View{}
                      : args.logits ? args.logits
                                    : view(backend.scratch(ScratchId::AttentionLogits, size_t(shape.num_q_heads) * shape.num_slots * 4));
  record_decode_partials(backend, shape, args, num_splits, view(partials), num_splits, logits);
  return {view(partials), num_splits, logits};
}

void attention_vulkan(Backend& backend, const AttentionShape& shape, const AttentionArgs& args) {
  vk::Recorder& recorder = backend.recorder();
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  const uint32_t dim = shape.head_dim;
  const uint32_t first_chunk_slot = shape.num_slots - shape.num_queries;
  const bool f16 = shape.dtype == Dtype::F16;
  // The decode kernel rotates its query (and the keys, unless stored rotated: record_decode_splits);
  // the chunk kernels read queries the rope op rotated, so their RoPE is the keys' alone.
  const RopeBindings key_rope = rope_bindings(shape.key_rope(), args.positions, args.turn_table, args.k);

  Tensor& lse = backend.scratch(ScratchId::AttentionLse, size_t(shape.num_queries) * shape.num_q_heads * 4);
  // The chunk kernels and their scores read queries rotated and scaled once, by the rope op;
  // decode rotates its single query itself (one dispatch less on the latency-bound path).
  const bool decode = shape.num_queries == 1;
  const bool needs_q_rot = !decode;
  Tensor* q_rot = nullptr;
  if (needs_q_rot) {
    q_rot = &backend.scratch(ScratchId::AttentionQuery, size_t(shape.num_queries) * shape.num_q_heads * dim * 4);
    rotate_queries(backend, {shape.num_queries, shape.num_q_heads, dim, shape.dtype, shape.rope}, args.q, args.positions,
                   first_chunk_slot, args.turn_table, *q_rot);
  }

  if (decode) {
    const DecodeSplits splits = record_decode_splits(backend, shape, args);
    const View lse_out = args.lse ? args.lse : view(lse);
    record_decode_merge(backend, shape, splits.partials, splits.num_splits, args.out, lse_out);
    if (args.scores) {
      const DecodeScoresPush scores_push{shape.num_slots, group};
      recorder.dispatch({"decode_scores", 3, sizeof(DecodeScoresPush), {kScoresWorkgroup}},
                        {slice(splits.logits), slice(lse_out), slice(args.scores)}, &scores_push,
                        group_count(shape.num_slots, kScoresWorkgroup), shape.num_kv_heads);
    }
  } else if (attention_on_cooperative_matrices(backend, shape)) {
    prefill_on_cooperative_matrices(backend, shape, args, key_rope, *q_rot, lse);
  } else {
    const uint32_t columns = dim / 8;
    const uint32_t row_groups = std::min(kPrefillMaxRowGroups, kPrefillThreads / columns);
    const ChunkPush push{shape.num_slots, shape.slot_stride, shape.num_queries, group, shape.num_q_heads};
    recorder.dispatch({"attention_prefill", 7, sizeof(ChunkPush), {row_groups * columns, dim, f16, key_rope.style, key_rope.rotary_dims}},
                      {slice(view(*q_rot)), slice(args.k), slice(args.v), key_rope.positions, key_rope.turns, slice(args.out), slice(view(lse))},
                      &push, group_count(uint64_t(shape.num_queries) * group, row_groups * kPrefillRowsPerGroup),
                      shape.num_kv_heads);
  }

  if (!decode && args.scores) {
    const ChunkPush push{shape.num_slots, shape.slot_stride, shape.num_queries, group, shape.num_q_heads};
    recorder.dispatch({"attention_scores", 6, sizeof(ChunkPush), {kScoresWorkgroup, dim, f16, key_rope.style, key_rope.rotary_dims}},
                      {slice(view(*q_rot)), slice(args.k), key_rope.positions, key_rope.turns, slice(view(lse)), slice(args.scores)}, &push,
                      group_count(shape.num_slots, kScoresWorkgroup), shape.num_kv_heads);
  }
}

}  // namespace kvc::ops
