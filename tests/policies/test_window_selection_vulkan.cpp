// A selection of several layers recorded at once (their scores first, then one top-k per run of
// layers that rank alike, then the compactions) keeps exactly what each layer's selection
// recorded alone keeps, on the CPU and on Vulkan, and Vulkan keeps what the CPU keeps: layers of
// two prefix lengths, budgets that differ within a run (PyramidKV's, P-HitKV's: still one top-k
// dispatch) or keep no prefix slot, runs longer than one top-k's k's per block, pooled
// attention and hit rate.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "ops/top_k.h"
#include "policies/window_selection.h"
#include "support/test_support.h"
#include "vulkan/recorder.h"

namespace kvc {
namespace {

constexpr uint32_t kQHeads = 4, kKvHeads = 2, kHeadDim = 16, kWindow = 4;

struct LayerCase {
  uint32_t slots, kept;
  WindowIndicator indicator;
};

struct LayerTensors {
  std::unique_ptr<Tensor> k, v, positions, k_to, v_to, positions_to;
};

// Each layer's kept positions (the compacted storage's positions, kv head by kv head). On
// Vulkan, `commands` (if given) receives the commands the selections recorded.
std::vector<std::vector<int32_t>> select(Backend& backend, const std::vector<SelectionShape>& shapes, const std::vector<float>& q,
                                         const std::vector<std::vector<float>>& keys, bool layer_by_layer,
                                         uint64_t* commands = nullptr) {
  auto q_tensor = test::make_tensor(backend, q.data(), q.size() * 4);
  std::vector<LayerTensors> layers;
  std::vector<LayerViews> from, to;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ops::WindowScoresShape& scores = shapes[i].scores;
    std::vector<int32_t> positions(size_t(kKvHeads) * scores.slot_stride);
    for (size_t j = 0; j < positions.size(); ++j) positions[j] = int32_t(j % scores.slot_stride);
    const size_t out_slots = size_t(kKvHeads) * shapes[i].out_slot_stride;
    LayerTensors layer{test::make_tensor(backend, keys[i].data(), keys[i].size() * 4), test::make_tensor(backend, keys[i].data(), keys[i].size() * 4),
                       test::make_tensor(backend, positions.data(), positions.size() * 4), test::make_poisoned(backend, out_slots * kHeadDim * 4),
                       test::make_poisoned(backend, out_slots * kHeadDim * 4), test::make_poisoned(backend, out_slots * 4)};
    from.push_back({view(*layer.k), view(*layer.v), view(*layer.positions)});
    to.push_back({view(*layer.k_to), view(*layer.v_to), view(*layer.positions_to)});
    layers.push_back(std::move(layer));
  }
  auto record = [&](const std::vector<SelectionShape>& part, const std::vector<LayerViews>& part_from, const std::vector<LayerViews>& part_to) {
    SelectionWorkspace workspace;
    backend.begin();
    const uint64_t before = backend.is_cpu() ? 0 : backend.recorder().commands_recorded();
    workspace.reserve(backend, part);
    workspace.record(backend, part, [&](size_t) { return view(*q_tensor); }, View{}, part_from, part_to);
    if (commands) *commands += backend.recorder().commands_recorded() - before;
    backend.submit();
  };
  if (layer_by_layer)
    for (size_t i = 0; i < shapes.size(); ++i) record({shapes[i]}, {from[i]}, {to[i]});
  else
    record(shapes, from, to);
  std::vector<std::vector<int32_t>> kept;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const uint32_t stride = shapes[i].out_slot_stride, held = shapes[i].kept_prefix + kWindow;
    const std::vector<unsigned char> bytes = test::read_tensor(backend, *layers[i].positions_to, size_t(kKvHeads) * stride * 4);
    std::vector<int32_t> positions;
    for (uint32_t head = 0; head < kKvHeads; ++head)
      for (uint32_t slot = 0; slot < held; ++slot) {
        int32_t position;
        std::memcpy(&position, bytes.data() + (size_t(head) * stride + slot) * 4, 4);
        positions.push_back(position);
      }
    kept.push_back(positions);
  }
  return kept;
}

}  // namespace

TEST_CASE("a selection of several layers keeps what each layer's selection alone keeps") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  // Runs: [0, 1] pooled with budgets of their own, [2] a longer prefix, [3, 4] nothing of the
  // prefix kept, [5, 6, 7] hit rate, two budgets.
  const std::vector<LayerCase> mixed = {{100, 20, WindowIndicator::PooledAttention}, {100, 13, WindowIndicator::PooledAttention},
                                        {137, 20, WindowIndicator::PooledAttention}, {100, 0, WindowIndicator::PooledAttention},
                                        {100, 0, WindowIndicator::PooledAttention},  {90, 30, WindowIndicator::HitRate},
                                        {90, 25, WindowIndicator::HitRate},          {90, 30, WindowIndicator::HitRate}};
  // Layers that rank alike, past what one top-k takes with a k each: the run splits.
  std::vector<LayerCase> pyramid;
  for (uint32_t layer = 0; layer < ops::kTopKMaxBlockKs + 3; ++layer) pyramid.push_back({41, 30 - layer, WindowIndicator::HitRate});
  // The top-k dispatches a selection of all the layers at once saves over one a layer: one a
  // layer that keeps prefix slots (a top-k of k = 0 records nothing), less one a run of them.
  const size_t mixed_saved = 6 - 3, pyramid_saved = pyramid.size() - 2;
  for (const auto& [cases, saved] : {std::pair{mixed, mixed_saved}, std::pair{pyramid, pyramid_saved}}) {
    std::vector<SelectionShape> shapes;
    std::vector<std::vector<float>> keys;
    for (const LayerCase& layer : cases) {
      SelectionShape shape;
      shape.scores = {kQHeads, kKvHeads, kHeadDim, kWindow, layer.slots, layer.slots + 3, Dtype::F32, {}};
      shape.kept_prefix = layer.kept;
      shape.indicator = layer.indicator;
      shape.pool_kernel = 3;
      if (layer.indicator == WindowIndicator::HitRate) shape.scores.hit_k = 10;
      shape.hit_min_count = hits_needed(0.5f, (kQHeads / kKvHeads) * kWindow);
      shape.out_slot_stride = layer.kept + kWindow + 2;
      shapes.push_back(shape);
      keys.push_back(test::random_floats(size_t(kKvHeads) * (layer.slots + 3) * kHeadDim, -3.0f, 3.0f));
    }
    const std::vector<float> q = test::random_floats(size_t(kWindow) * kQHeads * kHeadDim, -3.0f, 3.0f);
    INFO("layers ", cases.size());
    const auto cpu = select(test::cpu_backend(), shapes, q, keys, false);
    CHECK(cpu == select(test::cpu_backend(), shapes, q, keys, true));
    // f32 SIMT logits on Vulkan: ties between slots this far apart in score do not occur at this size.
    uint64_t at_once = 0, one_by_one = 0;
    CHECK(select(*gpu, shapes, q, keys, false, &at_once) == cpu);
    CHECK(select(*gpu, shapes, q, keys, true, &one_by_one) == cpu);
    // The same commands but the top-k's: one a layer recorded alone, one a run at once.
    CHECK(one_by_one - at_once == saved);
  }
  CHECK(test::validation_messages() == 0);
}

}  // namespace kvc
