// The fragment-layout classifier on maps made here (a device's own map is checked on the GPU by
// the prefill tests, which take the softmax route it picks): NVIDIA's layout is QuadRows;
// any other placement, or a length other than 8, is Opaque.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "vulkan/fragment_layout.h"

namespace kvc {
namespace {

constexpr int kLanes = 32, kElements = 8, kMatrixWords = kLanes * kElements;

// A map as fragment_layout_coopmat writes it, from where each matrix puts (lane, element).
template <typename APosition, typename CPosition>
std::vector<float> make_map(APosition a_position, CPosition c_position) {
  std::vector<float> map(2 * kMatrixWords + 2, 0.0f);
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < kElements; ++i) {
      map[lane * kElements + i] = static_cast<float>(a_position(lane, i));
      map[kMatrixWords + lane * kElements + i] = static_cast<float>(c_position(lane, i));
    }
  map[2 * kMatrixWords] = map[2 * kMatrixWords + 1] = kElements;
  return map;
}

// NVIDIA's, as an H100 (driver 580) reported it: row lane / 4 (elements 0-3) and 8 below
// (4-7), columns 2 (lane % 4) + i % 2, 8 further for elements 2, 3, 6 and 7.
int nvidia(int lane, int i) { return (lane / 4 + 8 * (i / 4)) * 16 + 2 * (lane % 4) + i % 2 + 8 * ((i / 2) % 2); }

// PTX's mma.m16n8k16 fragment order (the rows alternate first): the same elements of each lane
// in another order, which the kernels' element arithmetic does not follow.
int mma_order(int lane, int i) { return (lane / 4 + 8 * ((i / 2) % 2)) * 16 + 2 * (lane % 4) + i % 2 + 8 * (i / 4); }

// A wave32 layout of the RDNA3 kind: lane l holds column l % 16, rows 2 i + l / 16.
int column_per_lane(int lane, int i) { return (2 * i + lane / 16) * 16 + lane % 16; }

TEST_CASE("fragment layout: NVIDIA's is QuadRows, others are Opaque") {
  CHECK(vk::classify_fragment_layout(make_map(nvidia, nvidia)) == vk::FragmentLayout::QuadRows);
  CHECK(vk::classify_fragment_layout(make_map(mma_order, mma_order)) == vk::FragmentLayout::Opaque);
  CHECK(vk::classify_fragment_layout(make_map(column_per_lane, column_per_lane)) == vk::FragmentLayout::Opaque);
  // The accumulator as NVIDIA places it but A otherwise: P could not become A element by element.
  CHECK(vk::classify_fragment_layout(make_map(column_per_lane, nvidia)) == vk::FragmentLayout::Opaque);
  CHECK(vk::classify_fragment_layout(make_map(nvidia, column_per_lane)) == vk::FragmentLayout::Opaque);

  // One lane's two elements swapped, in either matrix.
  for (int matrix = 0; matrix < 2; ++matrix) {
    std::vector<float> map = make_map(nvidia, nvidia);
    std::swap(map[matrix * kMatrixWords + 5 * kElements + 1], map[matrix * kMatrixWords + 5 * kElements + 2]);
    CHECK(vk::classify_fragment_layout(map) == vk::FragmentLayout::Opaque);
  }
  // Lengths other than 8 (elements past a length read -1), and a map of the wrong size.
  std::vector<float> longer = make_map(nvidia, nvidia);
  longer[2 * kMatrixWords] = 16;
  CHECK(vk::classify_fragment_layout(longer) == vk::FragmentLayout::Opaque);
  std::vector<float> shorter = make_map(nvidia, [](int lane, int i) { return i < 4 ? nvidia(lane, i) : -1; });
  shorter[2 * kMatrixWords + 1] = 4;
  CHECK(vk::classify_fragment_layout(shorter) == vk::FragmentLayout::Opaque);
  std::vector<float> truncated = make_map(nvidia, nvidia);
  truncated.pop_back();
  CHECK(vk::classify_fragment_layout(truncated) == vk::FragmentLayout::Opaque);
}

}  // namespace
}  // namespace kvc
