// VkFFT behind a small interface: this header and fft.cpp are the only code that knows VkFFT.
// A plan is made once per shape and context (plan creation compiles GLSL at run time: 0.2-2 s,
// ../shared/GPU.md) and recorded into any number of submissions. Each plan transforms a buffer
// of its own, bound once: VkFFT keeps one descriptor set per plan and rewrites it when an
// append names another buffer (deciding so by comparing the VkBuffer* it is handed, not the
// buffer), which a command buffer recorded or in flight with the old binding cannot survive.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "vulkan/buffer.h"

namespace kvc::vk {

class Device;
class Recorder;

// `batch` independent complex transforms of `length` points each, f32 (re, im) pairs laid out
// [batch][length]. Any length: VkFFT falls back to Bluestein's algorithm for large primes.
struct FftShape {
  uint32_t length = 0;
  uint32_t batch = 1;
  bool operator<(const FftShape& other) const {
    return std::tie(length, batch) < std::tie(other.length, other.batch);
  }
};

class FftPlan {
 public:
  // Throws Error(KVC_ERROR_UNSUPPORTED) for shapes VkFFT cannot plan.
  FftPlan(Device& device, const FftShape& shape);
  ~FftPlan();
  FftPlan(const FftPlan&) = delete;
  FftPlan& operator=(const FftPlan&) = delete;

  // The plan's data: length * batch complex values, [batch][length], f32 (re, im).
  BufferSlice data() const;
  // In place on data(), unnormalised both ways: forward X[k] = sum_n x[n] e^{-2 pi i k n /
  // length}, inverse with e^{+2 pi i k n / length}.
  void record(Recorder& recorder, bool inverse);
  size_t bytes() const;
  const FftShape& shape() const;

 private:
  friend class ChirpFilter;  // transforms its filter through the plan, in a submission of its own
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The plan length P of a DFT of `length` points as a chirp-z transform (ChirpFilter) whose
// outputs are needed at `span` consecutive bins (cyclically; `length` for all of them): `length`
// itself when it is a power of two above 1, else the least P of the form f * 2^a (f = 1, 3, 5
// or 7) with P >= length + span - 1 (and >= 2: VkFFT plans no transform of one point), where
// the chirp's cyclic convolution does not wrap onto the bins read. Those forms only: the
// lengths of every prompt share a few plans (four an octave, so P is at most 1.25 times the
// least), where smooth sizes would make a plan per handful of lengths (each planning takes as
// long, 0.2-0.3 s).
uint32_t chirp_padded_length(uint32_t length, uint32_t span);

// A DFT of any length M through a plan of P = chirp_padded_length(M, S) points, Bluestein's
// chirp-z transform: with c[n] = e^{-pi i n^2 / M} (for any integer n; c[-n] = c[n]),
//   X[k] = sum_n x[n] e^{-2 pi i k n / M} = c[k] sum_n (x[n] c[n]) conj(c[k - n])
// (k n = (k^2 + n^2 - (k - n)^2) / 2), a cyclic convolution of P points. Only the S bins
// k = k0 + j (j < S, the span; taken mod M, X being M-periodic) are formed: the convolution's
// output j, with the filter h[m] = conj(c[k0 + m]) for -M < m < S, so P >= M + S - 1 points
// hold it without wrap. The caller's shaders premultiply x by chirp() and zero-pad to P; the
// plan's forward transform, a product with filter() and its inverse transform convolve; the
// caller's shaders read output j at point j and postmultiply it by span_chirp()[j] = c[k0 + j].
// Reversed, the same filter serves the other direction, the M outputs n of a transform whose
// inputs are nonzero at the span alone (an inverse DFT of a pruned spectrum): inputs at points
// j times span_chirp(), the filter's spectrum read at -f (it is then conj(c[m - k0]) for -S < m
// < M), outputs at points n < M times chirp(). Where P = M (M a power of two above 1, or another
// plan length with a span of one bin) the plan's forward transform alone is the DFT (direct(): the span is
// all M bins from 0 and both chirps are all ones).
// c is computed from n^2 mod 2M (its period) in integers and in double, so its phase keeps full
// precision at any M: an f32 angle of n^2 would lose it past M ~ 2^12.
class ChirpFilter {
 public:
  // Computes chirp() and filter() now, through `plan` (P points, any batch) in a submission of
  // its own that overwrites plan.data(): call it where no submitted work still uses the plan
  // (as in an operation or a step, whose recording runs after it; ../backend/backend.h).
  ChirpFilter(Device& device, uint32_t length, uint32_t span_first, uint32_t span, FftPlan& plan);
  ~ChirpFilter();
  ChirpFilter(const ChirpFilter&) = delete;
  ChirpFilter& operator=(const ChirpFilter&) = delete;

  uint32_t length() const { return length_; }
  uint32_t padded_length() const { return padded_length_; }
  uint32_t span_first() const { return span_first_; }  // k0
  uint32_t span() const { return span_; }              // S
  bool direct() const { return length_ == padded_length_; }
  // c[n], n < M: f32 (re, im); all ones when direct().
  BufferSlice chirp() const;
  // c[k0 + j], j < S: f32 (re, im); all ones when direct().
  BufferSlice span_chirp() const;
  // The P-point forward transform of h (h[m] at point m mod P), divided by P so that the
  // inverse transform needs no scaling: f32 (re, im) [P]. Not computed when direct().
  BufferSlice filter() const;
  // Device bytes of chirp() and filter().
  size_t bytes() const;

 private:
  size_t span_chirp_offset() const;  // in chirp_, aligned for a binding

  uint32_t length_;
  uint32_t span_first_;
  uint32_t span_;
  uint32_t padded_length_;
  std::unique_ptr<Buffer> chirp_, filter_;  // chirp_: chirp() then span_chirp()
};

// Plans by shape, and chirp filters by length and span. A plan lives while someone keeps it
// (keep()), or until a trim() finds nobody keeping it: a cache keeps the plans its decode step
// needs, so no plan is made on the decode path, and a context that sees many lengths does not
// hold a plan (and its buffer) for each forever. Plans of the chirp-z lengths (f * 2^a)
// outlive trim() within a budget (kRetainedPlanBytes in fft.cpp): chirp-z transforms of every
// length go through them, so a prompt of a new length whose padded length was seen before
// plans nothing.
//
// The budget: what the plans nobody keeps may hold across trim() (their data buffers; VkFFT's
// own work buffers come on top): the plans chirp-z transforms of every length share. Each
// costs 0.2-0.3 s of host time to plan on the H100 (KVC_PROFILE), more than FAEDKV's whole
// prompt transform takes on the GPU; 256 MiB holds FAEDKV's prefill plan at L = 128K (at most
// P = 2^18, 64 sequences: 128 MiB; 5 * 2^15 for its default chunks) beside its decode plan (16
// sequences: at most 32 MiB). Plans of those lengths stay whoever made them.
constexpr size_t kRetainedPlanBytes = size_t(256) << 20;

class FftPlans {
 public:
  explicit FftPlans(Device& device) : device_(device) {}
  FftPlan& get(const FftShape& shape) { return *keep(shape); }
  std::shared_ptr<FftPlan> keep(const FftShape& shape);
  // The chirp filter of `length`-point DFTs whose bins are needed at span_first .. + span - 1
  // (mod length; span = length: all), made (once per length and span, while kept) through the
  // plan {chirp_padded_length(length, span), batch}, which the caller then uses: get() it.
  std::shared_ptr<ChirpFilter> keep_chirp(uint32_t length, uint32_t span_first, uint32_t span, uint32_t batch);
  // Drops the plans and filters nobody keeps, but the chirp-z plans (f * 2^a) that fit
  // `retained_bytes` (the newest used first); call only when no recorded work can still use them.
  void trim(size_t retained_bytes = kRetainedPlanBytes);
  // Device bytes of the plans' data buffers and the filters held now.
  size_t bytes_held() const;
  size_t plans_held() const { return plans_.size(); }
  bool holds_plan(const FftShape& shape) const { return plans_.count(shape) != 0; }
  size_t chirp_filters_held() const { return filters_.size(); }
  // Plans made since the cache was created: what a test of plan reuse counts.
  uint64_t plans_made() const { return plans_made_; }

 private:
  struct Held {
    std::shared_ptr<FftPlan> plan;
    uint64_t last_use = 0;  // uses_ when last asked for
  };
  Device& device_;
  std::map<FftShape, Held> plans_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::shared_ptr<ChirpFilter>> filters_;  // by (M, k0, S)
  uint64_t uses_ = 0;
  uint64_t plans_made_ = 0;
};

}  // namespace kvc::vk
