// The device's own fragment map (cooperative-matrix devices only): every element of both
// matrices placed once, the layout the device reports is the one its map describes (a second
// probe agrees with the first), and NVIDIA's is QuadRows. An Opaque device prints its map, for
// whoever teaches libkvc its layout.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "vulkan/device.h"
#include "vulkan/fragment_layout.h"

namespace kvc {
namespace {

TEST_CASE("fragment layout: the device's map places every element once and names its layout") {
  Backend* gpu = test::vulkan_backend();
  REQUIRE(gpu != nullptr);
  vk::Device& device = gpu->device();
  if (device.matrix_path() != vk::MatrixPath::Cooperative) {
    CHECK(device.fragment_layout() == vk::FragmentLayout::Opaque);
    MESSAGE("skipped: ", device.matrix_path_detail());
    return;
  }
  // NVIDIA's drivers give QuadRows (an H100, driver 580): a driver that stopped would send the
  // prefill through shared memory, and its register route would go untested, unnoticed.
  if (device.properties().vendorID == 0x10DE) CHECK(device.fragment_layout() == vk::FragmentLayout::QuadRows);
  const std::vector<float> map = vk::read_fragment_map(device);
  REQUIRE(map.size() == 514);
  CHECK(vk::classify_fragment_layout(map) == device.fragment_layout());
  std::ostringstream text;
  for (int matrix = 0; matrix < 2; ++matrix) {
    text << (matrix == 0 ? "A (f16), length " : "\naccumulator (f32), length ") << map[512 + matrix] << ", lane: row.column of each element";
    for (int lane = 0; lane < 32; ++lane) {
      text << "\n  " << lane << ":";
      for (int i = 0; i < 8; ++i) {
        const int position = static_cast<int>(map[matrix * 256 + lane * 8 + i]);
        text << " " << position / 16 << "." << position % 16;
      }
    }
    // At 8 elements a lane, 32 lanes hold each of the 256 elements once.
    if (map[512 + matrix] == 8) {
      std::vector<float> positions(map.begin() + matrix * 256, map.begin() + (matrix + 1) * 256);
      std::sort(positions.begin(), positions.end());
      for (int i = 0; i < 256; ++i) CHECK(positions[i] == i);
    }
  }
  const std::string layout = vk::fragment_layout_name(device.fragment_layout());
  if (device.fragment_layout() == vk::FragmentLayout::Opaque) MESSAGE(device.name(), ": fragments ", layout, "\n", text.str());
  else MESSAGE(device.name(), ": fragments ", layout);
}

}  // namespace
}  // namespace kvc
