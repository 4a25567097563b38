#include "vulkan/fragment_layout.h"

#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "vulkan/buffer.h"
#include "vulkan/device.h"
#include "vulkan/recorder.h"

namespace kvc::vk {
namespace {

constexpr uint32_t kMatrix = 16;
constexpr uint32_t kLanes = 32;
constexpr uint32_t kElements = 8;  // a lane's share of 256
constexpr uint32_t kMatrixWords = kLanes * kElements;
constexpr uint32_t kWords = 2 * kMatrixWords + 2;

// Element i of lane `lane` under QuadRows, as row * 16 + column.
float quad_rows_position(uint32_t lane, uint32_t i) {
  const uint32_t row = lane / 4 + 8 * (i / 4);
  const uint32_t column = 2 * (lane % 4) + i % 2 + 8 * ((i / 2) % 2);
  return static_cast<float>(row * kMatrix + column);
}

}  // namespace

FragmentLayout classify_fragment_layout(const std::vector<float>& positions) {
  if (positions.size() != kWords || positions[2 * kMatrixWords] != kElements || positions[2 * kMatrixWords + 1] != kElements)
    return FragmentLayout::Opaque;
  for (uint32_t matrix = 0; matrix < 2; ++matrix)
    for (uint32_t lane = 0; lane < kLanes; ++lane)
      for (uint32_t i = 0; i < kElements; ++i)
        if (positions[matrix * kMatrixWords + lane * kElements + i] != quad_rows_position(lane, i)) return FragmentLayout::Opaque;
  return FragmentLayout::QuadRows;
}

std::vector<float> read_fragment_map(Device& device) {
  require(device.matrix_path() == MatrixPath::Cooperative, KVC_ERROR_INTERNAL, "fragment layout probed on a device without cooperative matrices");
  Buffer positions(device, kWords * sizeof(float), MemoryKind::HostVisible);
  Recorder recorder(device);
  recorder.begin();
  recorder.dispatch({"fragment_layout_coopmat", 1, 0, {}}, {BufferSlice{&positions}}, nullptr, 1);
  recorder.submit();
  std::vector<float> map(kWords);
  std::memcpy(map.data(), positions.mapped(), kWords * sizeof(float));
  return map;
}

FragmentLayout probe_fragment_layout(Device& device) { return classify_fragment_layout(read_fragment_map(device)); }

const char* fragment_layout_name(FragmentLayout layout) {
  return layout == FragmentLayout::QuadRows ? "quad rows" : "opaque";
}

bool rows_in_registers(const Device& device) {
  const char* setting = std::getenv("KVC_COOPMAT_SOFTMAX");
  return device.fragment_layout() == FragmentLayout::QuadRows && !(setting && std::strcmp(setting, "shared") == 0);
}

}  // namespace kvc::vk
