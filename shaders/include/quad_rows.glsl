// QuadRows fragments (vulkan/fragment_layout.h; the host takes a kernel's register route only
// on such a device): lane `lane` holds FRAGMENT elements of a 16 x 16 cooperative matrix, A
// and accumulator alike, element i at row lane / 4 + 8 * (i / 4), column 2 * (lane % 4) + i % 2
// + 8 * ((i / 2) % 2). A row's elements sit in one quad of lanes.
const uint FRAGMENT = 8;
uint fragment_half(uint i) { return i >> 2; }  // which of the lane's two rows
uint fragment_column(uint lane, uint i) { return 2u * (lane & 3u) + (i & 1u) + 8u * ((i >> 1) & 1u); }
