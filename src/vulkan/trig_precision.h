// Whether the device's built-in cos and sin are precise enough for RoPE. Vulkan bounds their
// error only to 2^-11 (absolute, on [-pi, pi]), so the kernels rotate by an exact integer
// reduction and a polynomial (shaders/include/quadrant_trig.glsl, error < 3e-8); where the
// built-ins measure within kBuiltinTrigBound of the exact values over a full turn, the decode
// kernel, which rotates every key it reads for the policies that re-assign positions, takes
// them instead: on an H100 that took f16 decode at 32K from 112 to 74 us (docs/benchmarks.md).
// The device is asked once, when it is created, by trig_precision.comp.
#pragma once

#include <vector>

namespace kvc::vk {

class Device;

// 2^-20: with the angle's own rounding to f32 (at most 4e-7 rad, near +-pi; the polynomial
// route reduces to a quarter turn first), a rotated key stays within 2e-6 of its norm of the
// exact rotation: far under f16 storage's rounding (2^-11) and a fifth of what the f32 tests allow.
constexpr double kBuiltinTrigBound = 1.0 / (1 << 20);

// The largest error of the built-ins in `samples` (angle, cos, sin triples, as
// trig_precision.comp writes them) against cos and sin of the same angle in double; infinity
// for an empty or malformed list, or a value that is not finite.
double builtin_trig_error(const std::vector<float>& samples);

// Runs trig_precision.comp on `device` and returns its samples. It records and waits on a
// recorder of its own, whose start resets the device's staging: only where no other recording
// is under way (device creation; tests between calls).
std::vector<float> read_trig_samples(Device& device);

// Whether the decode kernel rotates keys by the built-ins: where the probe found them precise,
// unless KVC_ROPE_TRIG=polynomial asks for the exact route every device takes (read per call,
// so that a test can run both).
bool rotates_by_builtin_trig(const Device& device);

}  // namespace kvc::vk
