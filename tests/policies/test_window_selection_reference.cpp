// How a selection's layers split into passes: as many consecutive layers as the workspace's
// parts hold within one binding, at least one a pass.
#include <doctest/doctest.h>

#include <vector>

#include "policies/window_selection.h"

namespace kvc {
namespace {

SelectionShape layer_shape(uint32_t slots, uint32_t kept) {
  SelectionShape shape;
  shape.scores = {8, 2, 16, 4, slots, slots, Dtype::F32, {}};
  shape.kept_prefix = kept;
  return shape;
}

}  // namespace

TEST_CASE("selection passes: consecutive layers within the binding limit, at least one each") {
  // A layer of 2 kv heads x 60 prefix slots takes 480 bytes of scores, a 512-byte part (256-byte
  // aligned); 2 x 10 kept indices take 80 bytes, a 256-byte part.
  const std::vector<SelectionShape> shapes(5, layer_shape(64, 10));
  CHECK(selection_passes(shapes, 1 << 20) == std::vector<size_t>{0, 5});
  CHECK(selection_passes(shapes, 1024) == std::vector<size_t>{0, 2, 4, 5});
  CHECK(selection_passes(shapes, 1535) == std::vector<size_t>{0, 2, 4, 5});
  CHECK(selection_passes(shapes, 1536) == std::vector<size_t>{0, 3, 5});
  // A limit below one layer's part still gives every layer a pass of its own.
  CHECK(selection_passes(shapes, 100) == std::vector<size_t>{0, 1, 2, 3, 4, 5});
  // Parts of different sizes: 2 x 396 prefix slots take a 3328-byte part.
  const std::vector<SelectionShape> mixed{layer_shape(64, 10), layer_shape(400, 300), layer_shape(64, 10), layer_shape(64, 10)};
  CHECK(selection_passes(mixed, 4000) == std::vector<size_t>{0, 2, 4});
  CHECK(selection_passes(mixed, 3800) == std::vector<size_t>{0, 1, 2, 4});
  CHECK(selection_passes({}, 1024) == std::vector<size_t>{0, 0});
}

}  // namespace kvc
