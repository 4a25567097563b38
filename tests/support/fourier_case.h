// One FourierAttention decode problem with random inputs, built the way the policy builds a
// layer: random middle rows projected (hippo_fourier_project) and fitted (hippo_fourier_fit) on
// random dims, their other dims packed (gather_dims); runnable on any backend.
#pragma once

#include <vector>

#include "ops/fourier_attention.h"

namespace kvc::test {

struct FourierCase {
  ops::FourierAttentionShape shape;
  std::vector<float> q;                  // [qh][d], rounded to the dtype
  std::vector<float> k, v;               // [kv][slot_stride][d], rounded; the slack rows NaN
  std::vector<float> k_middle, v_middle; // packed, [kv][d - compressed][middle_stride], rounded; the slack NaN
  std::vector<uint32_t> k_dims, v_dims;  // [kv][d]
  std::vector<float> k_coefficients, v_coefficients, k_affine, v_affine;

  // slot_stride gets 3 slack rows; middle_stride is num_middle rounded up to 8 (the slack of the
  // last vector a kernel reads, or none); q in [-q_range, q_range], keys in [-1, 1], values in
  // [0, 1].
  static FourierCase random(const ops::FourierAttentionShape& shape, float q_range = 2.0f);

  // ops::fourier_attention on `backend` with a poisoned output: [qh][d].
  std::vector<float> run(Backend& backend) const;
};

}  // namespace kvc::test
