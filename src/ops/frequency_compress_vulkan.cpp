// Vulkan FreqKV compression: three routes.
//
// FFT (shaders/frequency_compress.comp): one workgroup per (head, PAIRS pairs of head dims)
// holds its columns in shared memory and runs DCT-II, truncation and DCT-III there through
// mixed-radix FFTs, O(N log N) per column, reading N rows and writing L in place: one pass
// over memory. It runs whenever N and L factor into radices 2..31 (each stage's butterfly
// lives in registers) and one pair's N complex values fit in shared memory (N <= 4096 on
// lavapipe, 6144 on the H100), small N included: measured on the H100 (32 layers x 8 kv heads,
// d = 128, f32), N - S = 64 took 0.17 ms on this route against 0.80 ms for N - S = 61 on the
// dense one, and N - S = 4092 took 3.2 ms (f16 2.4 ms; 1.78 / 1.61 ms after the changes below)
// against the dense route's 26.5 ms.
//
// Chirp: the same kernel where N or L has a prime factor above 31, that length's DFT taken as
// a cyclic convolution of a 7-smooth length M >= 2n - 1 (Bluestein), when a pair's M points
// fit in shared memory: N - S = 2044 = 4 * 7 * 73 in 2.5 ms on the H100 (f32), 61 in 0.21 ms.
//
// Dense (ops/sequence_transform.h with ops/dct_matrix.h's fused matrix): every other shape,
// e.g. N - S above 3072 with a large prime factor, or N > 6144 (N - S = 2044 took 7.2 ms
// here). L * N multiply-adds per column, out of place through scratch, then copied back with
// the R recent rows.
//
// Where the FFT route's time went at N - S = 4092 (H100, f32 / f16, 32 layers): loading and
// storing alone 1.85 / 1.08 ms, the radix-11 and -31 stages 1.0 ms, the rest 0.3 ms. The loads
// were the problem: only one pair (8 bytes of a 512-byte f32 row) fits per workgroup at this N,
// and the time followed the number of L2 requests. Holding 2 (f32) or 4 (f16) pairs in
// registers and taking them through shared memory in turn, each thread moving 16 contiguous
// bytes of a row, took the whole op from 3.18 / 2.43 ms to 1.97 / 1.82 ms; the odd-prime
// butterflies' roots as constants, to 1.90 / 1.74 ms; the spectral step forming entries t and
// L - t together, to 1.78 / 1.61 ms. The floor is 0.28 ms f32: what is left is one workgroup
// per SM (128 registers a thread at 512 threads), each phase alone on the SM between barriers,
// and the radix-31 stages' idle threads (docs/benchmarks.md, "FreqKV compression", has the
// parts and the workgroup shapes tried).
//
// Why not VkFFT's DCT: it refuses N = 4092 and goes wrong along the cache's
// strided axis on the H100 (../shared/GPU.md), so it would need a transpose into [head][d][N],
// an R2C FFT, a twiddle pass, an inverse FFT and a transpose back: five passes over memory
// where the fused kernel makes one.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "ops/dct_matrix.h"
#include "ops/frequency_compress.h"
#include "ops/sequence_transform.h"
#include "ops/vulkan_args.h"
#include "vulkan/device.h"

namespace kvc::ops {
namespace {

constexpr uint32_t kItemsPerThread = 8;  // ITEMS_PER_THREAD in the shader
constexpr uint32_t kMaxStages = 8;       // the shader's IN_RADIX_0 .. _7
constexpr uint32_t kMaxPairs = 8;        // 16 dims: 64-byte row segments in f32
constexpr uint32_t kMaxRounds = 4;       // MAX_ROUNDS
// Bytes of a row each thread reads and writes at once, where shared memory holds too few pairs
// for that: ROUNDS batches of pairs then ride in registers.
constexpr uint32_t kSegmentBytes = 16;
constexpr uint32_t kMinThreads = 64, kMaxThreads = 1024;
constexpr uint32_t kOddRadices[] = {3, 5, 7, 11, 13, 17, 19, 23, 29, 31};  // MAX_RADIX = 31

struct Push {
  uint32_t first, head_elements;
};

// The stage radices of a length-`length` FFT, or nothing when a prime factor exceeds 31 or
// there are more than 8 stages. Powers of two first, in as few stages as radix 16 allows
// (each stage is a pass through shared memory and a barrier); odd radices last: the last
// stages' butterflies are contiguous, and an odd radix strides shared memory without bank
// conflicts.
std::optional<std::vector<uint32_t>> stage_radices(uint32_t length) {
  if (length == 0) return std::nullopt;
  std::vector<uint32_t> radices;
  while (length % 16 == 0) radices.push_back(16), length /= 16;
  for (uint32_t radix : {8u, 4u, 2u})
    if (length % radix == 0) radices.push_back(radix), length /= radix;
  for (uint32_t radix : kOddRadices)
    while (length % radix == 0) radices.push_back(radix), length /= radix;
  if (length != 1 || radices.size() > kMaxStages) return std::nullopt;
  return radices;
}

// How the shader takes one of its two transforms (length N or L): an FFT of the length itself,
// or the chirp-z route's cyclic convolution of `fft_length` points, the smallest 7-smooth
// length >= 2 length - 1 (radices 2 to 7 only: the large odd ones leave threads idle).
struct TransformPlan {
  uint32_t length = 0, fft_length = 0;
  std::vector<uint32_t> radices;
  bool chirp() const { return fft_length != length; }
};

TransformPlan transform_plan(uint32_t length) {
  if (auto radices = stage_radices(length)) return {length, length, *radices};
  for (uint32_t fft_length = 2 * length - 1;; ++fft_length) {
    uint32_t rest = fft_length;
    for (uint32_t prime : {2u, 3u, 5u, 7u})
      while (rest % prime == 0) rest /= prime;
    if (rest != 1) continue;
    if (auto radices = stage_radices(fft_length)) return {length, fft_length, *radices};
  }
}

// The radices packed 8 bits each, stage 0 lowest (the shader's *_RADICES_LOW and _HIGH).
std::pair<uint32_t, uint32_t> packed(const std::vector<uint32_t>& radices) {
  uint64_t bits = 0;
  for (size_t stage = 0; stage < radices.size(); ++stage) bits |= uint64_t(radices[stage]) << (8 * stage);
  return {static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32)};
}

struct FftLaunch {
  uint32_t pairs = 0, threads = 0, rounds = 1;
  TransformPlan in, out;
};

std::optional<FftLaunch> fft_launch(const vk::Device& device, const FrequencyCompressShape& shape) {
  const TransformPlan in = transform_plan(shape.in_length), out = transform_plan(shape.out_length);
  const uint64_t signal_length = std::max(in.fft_length, out.fft_length);  // SIGNAL_STRIDE
  const VkPhysicalDeviceLimits& limits = device.properties().limits;
  const uint64_t shared_bytes = limits.maxComputeSharedMemorySize;
  const uint64_t most_threads = std::min({kMaxThreads, limits.maxComputeWorkGroupInvocations, limits.maxComputeWorkGroupSize[0]});
  // The most pairs (a power of two dividing head_dim / 2) whose signals fit in shared memory.
  for (uint32_t pairs = kMaxPairs; pairs >= 1; pairs /= 2) {
    const uint64_t values = uint64_t(pairs) * signal_length;
    if ((shape.head_dim / 2) % pairs != 0 || values * 8 > shared_bytes) continue;
    const uint64_t threads = std::max<uint64_t>(kMinThreads, (values + kItemsPerThread * 32 - 1) / (kItemsPerThread * 32) * 32);
    if (threads > most_threads) continue;
    const uint32_t pair_bytes = 2 * static_cast<uint32_t>(dtype_size(shape.dtype));
    uint32_t rounds = 1;
    while (rounds < kMaxRounds && pairs * rounds * pair_bytes < kSegmentBytes && (shape.head_dim / 2) % (pairs * rounds * 2) == 0)
      rounds *= 2;
    return FftLaunch{pairs, static_cast<uint32_t>(threads), rounds, in, out};
  }
  return std::nullopt;
}

std::string twiddles_key(const FrequencyCompressShape& shape) {
  return "frequency_compress twiddles " + std::to_string(shape.in_length) + " " + std::to_string(shape.out_length);
}

std::string matrix_key(const FrequencyCompressShape& shape) {
  return "freqkv_compression_matrix " + std::to_string(shape.in_length) + " " + std::to_string(shape.out_length);
}

// Where the shader's decimation-in-frequency FFT leaves output k (its in_position).
uint32_t dif_position(uint32_t k, const TransformPlan& plan) {
  uint32_t position = 0, span = plan.fft_length;
  for (uint32_t radix : plan.radices) {
    span /= radix;
    position += (k % radix) * span;
    k /= radix;
  }
  return position;
}

// The chirp-z route's two tables for a transform of sign `sign` (-1 forward, +1 inverse):
// the chirp c_m = e^(sign i pi m^2 / n), m < n, then the filter: the DFT of b (b_m = conj c_m
// for |m| < n, cyclically, 0 elsewhere) over the FFT length, divided by it for the shader's
// unnormalised inverse FFT, in digit-reversed order.
void push_chirp_tables(std::vector<float>& table, const TransformPlan& plan, double sign) {
  const uint32_t n = plan.length, m_total = plan.fft_length;
  // pi m^2 / n as 2 pi (m^2 mod 2n) / 2n: exact however long the transform.
  auto chirp_angle = [&](uint64_t m) { return sign * M_PI * static_cast<double>((m * m) % (2 * uint64_t(n))) / n; };
  for (uint32_t m = 0; m < n; ++m) {
    table.push_back(static_cast<float>(std::cos(chirp_angle(m))));
    table.push_back(static_cast<float>(std::sin(chirp_angle(m))));
  }
  std::vector<double> cos_root(m_total), sin_root(m_total);
  for (uint32_t j = 0; j < m_total; ++j) {
    cos_root[j] = std::cos(2.0 * M_PI * j / m_total);
    sin_root[j] = std::sin(2.0 * M_PI * j / m_total);
  }
  // b's nonzero points: slot m (m < n) and M - m hold conj c_m.
  struct Point {
    uint32_t slot;
    double re, im;
  };
  std::vector<Point> b;
  for (uint32_t m = 0; m < n; ++m) {
    const double angle = -chirp_angle(m);
    b.push_back({m, std::cos(angle), std::sin(angle)});
    if (m > 0) b.push_back({m_total - m, std::cos(angle), std::sin(angle)});
  }
  std::vector<double> filter(2 * size_t(m_total));
  for (uint32_t k = 0; k < m_total; ++k) {
    double re = 0.0, im = 0.0;
    for (const Point& point : b) {
      const uint32_t root = static_cast<uint32_t>((uint64_t(point.slot) * k) % m_total);  // e^(-2 pi i slot k / M)
      re += point.re * cos_root[root] + point.im * sin_root[root];
      im += point.im * cos_root[root] - point.re * sin_root[root];
    }
    const uint32_t at = dif_position(k, plan);
    filter[2 * size_t(at)] = re / m_total;
    filter[2 * size_t(at) + 1] = im / m_total;
  }
  for (double value : filter) table.push_back(static_cast<float>(value));
}

// The shader's table (see its Twiddles binding), complex values as (re, im) f32 pairs.
std::vector<float> twiddles(const TransformPlan& in, const TransformPlan& out) {
  std::vector<float> table;
  auto push = [&](double angle) {
    table.push_back(static_cast<float>(std::cos(angle)));
    table.push_back(static_cast<float>(std::sin(angle)));
  };
  for (uint32_t m = 0; m < in.fft_length; ++m) push(-2.0 * M_PI * m / in.fft_length);
  for (uint32_t m = 0; m < out.fft_length; ++m) push(-2.0 * M_PI * m / out.fft_length);
  for (uint32_t t = 0; t < out.length; ++t) push(-M_PI * t / (2.0 * in.length));
  for (uint32_t t = 0; t < out.length; ++t) push(M_PI * t / (2.0 * out.length));
  if (in.chirp()) push_chirp_tables(table, in, -1.0);
  if (out.chirp()) push_chirp_tables(table, out, 1.0);
  return table;
}

Tensor& build_table(Backend& backend, const FrequencyCompressShape& shape, bool fft) {
  if (fft)
    return backend.shared_table(twiddles_key(shape),
                                [&] { return twiddles(transform_plan(shape.in_length), transform_plan(shape.out_length)); });
  // 33 MiB and 0.3 s of host time at Llama-2's window; one per (N, L) and backend.
  return backend.shared_table(matrix_key(shape), [&] { return freqkv_compression_matrix(shape.in_length, shape.out_length); });
}

}  // namespace

FrequencyCompressRoute frequency_compress_route(const Backend& backend, const FrequencyCompressShape& shape) {
  const std::optional<FftLaunch> launch = fft_launch(backend.device(), shape);
  if (!launch) return FrequencyCompressRoute::Dense;
  return launch->in.chirp() || launch->out.chirp() ? FrequencyCompressRoute::Chirp : FrequencyCompressRoute::Fft;
}

void frequency_compress_prepare(Backend& backend, const FrequencyCompressShape& shape) {
  if (backend.is_cpu()) return;
  build_table(backend, shape, frequency_compress_route(backend, shape) != FrequencyCompressRoute::Dense);
}

void frequency_compress_vulkan(Backend& backend, const FrequencyCompressShape& shape, const FrequencyCompressArgs& args) {
  const size_t element_bytes = dtype_size(shape.dtype), row_bytes = shape.head_dim * element_bytes;
  require(args.states.offset % (2 * element_bytes) == 0, KVC_ERROR_INTERNAL,
          "frequency_compress: the states view must start on an even element");
  const std::optional<FftLaunch> launch = fft_launch(backend.device(), shape);
  // Inside a submission the table can only be looked up: building it would submit.
  Tensor* const table_found = backend.find_shared_table(launch ? twiddles_key(shape) : matrix_key(shape));
  require(table_found != nullptr, KVC_ERROR_INTERNAL, "frequency_compress: frequency_compress_prepare was not called for this shape");
  Tensor& table = *table_found;
  if (launch) {
    // The shader loads a thread's 2 * rounds elements as one word of up to 16 bytes.
    const size_t first = args.states.offset / element_bytes;
    uint32_t rounds = launch->rounds;
    while (first % std::min<size_t>(2 * rounds, 16 / element_bytes) != 0) rounds /= 2;
    const auto in_radices = packed(launch->in.radices), out_radices = packed(launch->out.radices);
    const vk::KernelSpec spec{"frequency_compress", 2, sizeof(Push),
                              {launch->threads, shape.head_dim, shape.dtype == Dtype::F16, launch->pairs, shape.in_length,
                               shape.out_length, in_radices.first, in_radices.second, out_radices.first, out_radices.second,
                               rounds, shape.recent_length, launch->in.fft_length, launch->out.fft_length}};
    const Push push{static_cast<uint32_t>(first), shape.head_stride * shape.head_dim};
    backend.recorder().dispatch(spec, {slice(View{args.states.tensor, 0}), slice(view(table))}, &push,
                                shape.head_dim / 2 / (launch->pairs * rounds), shape.num_heads, 1);
    return;
  }
  // Each head's L compressed rows and then its R recent rows gather in scratch, and one copy
  // takes them all back.
  const uint32_t kept_rows = shape.out_length + shape.recent_length;
  const size_t kept_bytes = size_t(kept_rows) * row_bytes, head_bytes = size_t(shape.head_stride) * row_bytes;
  Tensor& kept = backend.scratch(ScratchId::FrequencyCompressed, size_t(shape.num_heads) * kept_bytes);
  sequence_transform_vulkan(backend,
                            {shape.num_heads, shape.head_dim, shape.in_length, shape.out_length, shape.head_stride, kept_rows,
                             shape.dtype},
                            {args.states, view(table), view(kept)});
  if (shape.recent_length)
    backend.copy_strided(*args.states.tensor, args.states.offset + size_t(shape.in_length) * row_bytes, head_bytes, kept,
                         size_t(shape.out_length) * row_bytes, kept_bytes, size_t(shape.recent_length) * row_bytes, shape.num_heads);
  backend.copy_strided(kept, 0, kept_bytes, *args.states.tensor, args.states.offset, head_bytes, kept_bytes, shape.num_heads);
}

}  // namespace kvc::ops
