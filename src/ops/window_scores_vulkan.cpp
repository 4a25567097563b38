// Vulkan window scores: queries rotated and scaled once (rope op); logits of every
// (query head, window query, prefix slot) written into `probs`; one workgroup per
// (query head, window query) row adds the window's own causal logits and normalises the row
// in place; the sums per kv head read the normalised rows.
#include <algorithm>
#include <string>

#include "ops/rotated_reads_vulkan.h"
#include "ops/window_scores.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kLogitsWorkgroup = 64;
constexpr uint32_t kSoftmaxWorkgroup = 256;
constexpr uint32_t kSumWorkgroup = 256;

struct WindowPush {
  uint32_t num_prefix, slot_stride, window, group_size, num_q_heads;
};

}  // namespace

void window_scores_vulkan(Backend& backend, const WindowScoresShape& shape, const WindowScoresArgs& args) {
  vk::Recorder& recorder = backend.recorder();
  const uint32_t group = shape.num_q_heads / shape.num_kv_heads;
  const uint32_t dim = shape.head_dim;
  const bool f16 = shape.dtype == Dtype::F16;
  const uint64_t prob_bytes = uint64_t(shape.num_q_heads) * shape.window * shape.num_prefix() * 4;
  require(prob_bytes <= std::min<uint64_t>(backend.max_buffer_bytes(), uint64_t(1) << 32), KVC_ERROR_CAPACITY,
          "window scores of " + std::to_string(shape.num_q_heads) + " heads x " + std::to_string(shape.window) + " queries x " +
              std::to_string(shape.num_prefix()) + " slots take " + std::to_string(prob_bytes) +
              " bytes, more than one binding may cover: shorten the window or the prompt");
  const RopeBindings rope = rope_bindings(shape.rope, args.positions, args.turn_table, args.k);
  const uint32_t rope_style = rope.style, rotary_dims = rope.rotary_dims;
  const vk::BufferSlice positions = rope.positions, turns = rope.turns;

  Tensor& q_rot = backend.scratch(ScratchId::WindowQuery, size_t(shape.window) * shape.num_q_heads * dim * 4);
  rotate_queries(backend, {shape.window, shape.num_q_heads, dim, shape.dtype, shape.rope}, args.q, args.positions,
                 shape.num_prefix(), args.turn_table, q_rot);

  const WindowPush push{shape.num_prefix(), shape.slot_stride, shape.window, group, shape.num_q_heads};
  const uint32_t prefix_groups = group_count(shape.num_prefix(), kLogitsWorkgroup);
  recorder.dispatch({"window_logits", 5, sizeof(WindowPush), {kLogitsWorkgroup, dim, f16, rope_style, rotary_dims}},
                    {slice(view(q_rot)), slice(args.k), positions, turns, slice(args.probs)}, &push, prefix_groups,
                    shape.num_kv_heads);
  recorder.dispatch({"window_softmax", 5, sizeof(WindowPush), {kSoftmaxWorkgroup, dim, f16, rope_style, rotary_dims}},
                    {slice(view(q_rot)), slice(args.k), positions, turns, slice(args.probs)}, &push,
                    group_count(uint64_t(shape.num_q_heads) * shape.window, 1));
  recorder.dispatch({"window_sum", 2, sizeof(WindowPush), {kSumWorkgroup}}, {slice(args.probs), slice(args.cumulative)}, &push,
                    group_count(shape.num_prefix(), kSumWorkgroup), shape.num_kv_heads);
}

}  // namespace kvc::ops
