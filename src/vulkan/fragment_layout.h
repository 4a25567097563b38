// Where a subgroup's lanes hold a 16 x 16 cooperative matrix's elements. VK_KHR_cooperative_matrix
// leaves it to the device and gives no access to an element's row, so a row-wise softmax must
// take its logits through shared memory, unless the layout is known: the device is asked once,
// when it is created, by a kernel that loads matrices of known contents (fragment_layout_coopmat).
#pragma once

#include <cstdint>
#include <vector>

namespace kvc::vk {

class Device;

enum class FragmentLayout : uint32_t {
  Opaque = 0,  // not known: kernels keep to whole-matrix operations
  // NVIDIA's (an H100, driver 580): lane l holds 8 elements of a 16 x 16 f16 A matrix and of an
  // f32 accumulator alike, element i at row l / 4 + 8 (i / 4) and column 2 (l % 4) + i % 2 +
  // 8 ((i / 2) % 2). So a row's elements sit in one quad of lanes (l / 4), and an
  // accumulator's element i becomes the A matrix's element i with no data movement.
  QuadRows = 1,
};

// The layout a map describes: `positions` as fragment_layout_coopmat writes it (512 element
// values, the A matrix's then the accumulator's, lane-major, 8 a lane, -1 past a length; then
// the two lengths).
FragmentLayout classify_fragment_layout(const std::vector<float>& positions);

// Runs fragment_layout_coopmat on `device` (whose path must be the cooperative one) and returns
// its map. It records and waits on a recorder of its own, whose start resets the device's
// staging: only where no other recording is under way (device creation; tests between calls).
std::vector<float> read_fragment_map(Device& device);

// classify_fragment_layout(read_fragment_map(device)).
FragmentLayout probe_fragment_layout(Device& device);

const char* fragment_layout_name(FragmentLayout layout);

// Whether the cooperative-matrix kernels do their row-wise work (softmax, row statistics) on
// accumulator elements in registers: where the device's fragments are QuadRows, unless
// KVC_COOPMAT_SOFTMAX=shared asks for the shared-memory route every device can take (read per
// call, so that a test can run both).
bool rows_in_registers(const Device& device);

}  // namespace kvc::vk
