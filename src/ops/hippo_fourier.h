// HiPPO-FourierT, as FourierAttention (Liu et al., "Beyond Homogeneous Attention: Memory-
// Efficient LLMs via Fourier-Approximated KV Cache") uses it: a segment of a cache's rows is
// held, dim by dim along the sequence, as the 2N real coefficients of the translated Fourier
// basis of eq. 4, C = (1/T) F X, where F's rows 2n and 2n + 1 at column t are cos(2 pi n t / T)
// and sin(2 pi n t / T) (n < N; column t is the token's index in the compressed middle
// segment; T the translated window, the maximum context, sec. 3.3). Eq. 6 (appendix C's
// forward-Euler update) adds one column's term when a token leaves the local window: the same
// sum, one token longer, so one op does both. Reconstruction is F^T C (eq. 5), then the
// per-dim standardization of appendix D ("record the average value and standard deviation of
// each dimension in the original and reconstructed cache, and use these to standardize"):
// x^ = scale (F^T C) + offset with scale = std(x) / std(F^T C) and offset = mean(x) -
// scale mean(F^T C), both measured over the segment compressed at prefill. We take the
// standard deviation the text names; the authors' code uses the largest absolute deviation
// from the mean instead. Section 3.4 picks the dims to compress by the mean squared error of
// that standardized reconstruction.
//
// Two Vulkan routes for the projection and the fit (the CPU has one, direct sums in double).
// Direct: each coefficient (and, in the fit, each reconstructed token) is its own sum, O(N L)
// per dim: right for eq. 6's few tokens. Transform: the projection is bins 0 .. N - 1 of the
// segment's length-T DFT (ops/segment_spectrum: eq. 4's rows are cos and -sin of those bins),
// and the fit's F^T C at every token is one inverse length-T DFT of the coefficients made
// Hermitian (two dims per complex transform), O(T log T) per dim: the prefill's.
//
// Layouts: rows [num_heads][slot_stride][head_dim] in the cache dtype; dims uint32
// [num_heads][head_dim], each head's row a permutation of 0 .. head_dim - 1 whose first
// num_dims entries are the dims an op works on; coefficients f32 [num_heads][2N][num_dims];
// affine f32 [num_heads][2][num_dims] (scales, then offsets). Angles are reduced exactly, (n t) mod
// T in integers, so long windows lose no precision.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "common/dtype.h"

namespace kvc::ops {

enum class HippoFourierRoute { Direct, Transform };

struct HippoFourierShape {
  uint32_t num_heads = 0;
  uint32_t head_dim = 0;
  uint32_t num_states = 0;     // N: 2N real coefficients per dim
  uint32_t window_length = 0;  // T <= 2^24: every basis index used is below it
  uint32_t num_dims = 0;       // dims per head the op works on (<= head_dim)
  Dtype dtype = Dtype::F32;    // of rows
  // Vulkan's. Transform needs an even head_dim and 2N <= T (every route the segment inside the window).
  HippoFourierRoute route = HippoFourierRoute::Direct;
};

// Tokens first_slot .. first_slot + length - 1 of every head's rows, which are columns
// first_index .. first_index + length - 1 of eq. 4's F.
struct HippoFourierSegment {
  uint32_t slot_stride = 0;
  uint32_t first_slot = 0;
  uint32_t length = 0;
  uint32_t first_index = 0;
};

struct HippoFourierProjectArgs {
  View rows;
  View dims;
  View coefficients;  // read and written: the segment's (1/T) F X is added (eq. 4, eq. 6)
  View bins;          // uint32 0, 1, ..., N - 1: Transform only
};

// Outside a submission: plans the Transform route's transforms for this shape (its
// window_length and head_dim; the fit's num_dims up to head_dim) and keeps them while the
// handle lives, so that no plan is made when a prompt ends. Null on the CPU.
std::shared_ptr<void> hippo_fourier_prepare(Backend& backend, const HippoFourierShape& shape);
std::shared_ptr<void> hippo_fourier_prepare_vulkan(Backend& backend, const HippoFourierShape& shape);

// The ops' contract on where a segment lies: T <= 2^24 and first_index + length <= T, so that
// every basis index n t is reduced mod T exactly (the shaders' kvc_mulmod needs operands below
// T); KVC_ERROR_INTERNAL otherwise. hippo_fourier_project, hippo_fourier_fit and fourier_fold
// check it on both backends.
void require_segment_in_window(uint32_t window_length, uint32_t first_index, uint32_t length);

// coefficients[h][r][j] += (1/T) sum_i F[r][first_index + i] rows[h][first_slot + i][dims[h][j]].
void hippo_fourier_project(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                           const HippoFourierProjectArgs& args);
void hippo_fourier_project_cpu(const HippoFourierShape& shape, const HippoFourierSegment& segment,
                               const HippoFourierProjectArgs& args);
void hippo_fourier_project_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                                  const HippoFourierProjectArgs& args);

struct HippoFourierFitArgs {
  View rows;          // the segment the coefficients were projected from
  View dims;
  View coefficients;
  View affine;        // out: scale and offset per dim
  View squared_error; // out, f32 [num_heads][num_dims]: mean over the segment of (x^ - x)^2
};

// Appendix D's standardization fitted on the segment, and sec. 3.4's reconstruction error.
// A dim whose reconstruction is constant over the segment gets scale 0 (x^ = mean(x)).
void hippo_fourier_fit(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                       const HippoFourierFitArgs& args);
void hippo_fourier_fit_cpu(const HippoFourierShape& shape, const HippoFourierSegment& segment, const HippoFourierFitArgs& args);
void hippo_fourier_fit_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierSegment& segment,
                              const HippoFourierFitArgs& args);

struct HippoFourierChooseArgs {
  View squared_error;  // f32 [num_heads][head_dim]: a fit over every dim, in dim order
  View dims;           // out
};

// Sec. 3.4: per head, the num_dims dims whose standardized reconstruction errs least (ties to
// the lower dim) become dims[h][0 .. num_dims), ascending; the others follow, ascending.
void hippo_fourier_choose_dims(Backend& backend, const HippoFourierShape& shape, const HippoFourierChooseArgs& args);
void hippo_fourier_choose_dims_cpu(const HippoFourierShape& shape, const HippoFourierChooseArgs& args);
void hippo_fourier_choose_dims_vulkan(Backend& backend, const HippoFourierShape& shape, const HippoFourierChooseArgs& args);

struct HippoFourierReconstructArgs {
  View coefficients;
  View affine;
  View out;  // f32 [num_heads][length][num_dims]: x^ of the segment's tokens
};

// x^[h][i][j] = scale (sum_r F[r][first_index + i] C[h][r][j]) + offset (eq. 5, appendix D);
// reads no rows (segment.slot_stride and first_slot are not used). CPU only: the
// materialize-then-attend reference that FourierAttention's decode is checked against.
void hippo_fourier_reconstruct_cpu(const HippoFourierShape& shape, const HippoFourierSegment& segment,
                                   const HippoFourierReconstructArgs& args);
// The same from host arrays: returns [num_heads][length][num_dims].
std::vector<float> hippo_fourier_reconstruct_host(const HippoFourierShape& shape, uint32_t length, uint32_t first_index,
                                                  const float* coefficients, const float* affine);

// Basis column `index` of F at row pair n: (cos, sin) of 2 pi ((n index) mod T) / T.
void hippo_fourier_basis(uint32_t n, uint64_t index, uint32_t window_length, double& cos_value, double& sin_value);

}  // namespace kvc::ops
