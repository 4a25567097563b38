// A chirp-z transform's span of bins (ops/bin_span.h, vulkan/fft.h ChirpFilter): bins k =
// first .. first + count - 1 (mod M) sit at the transform's points j = 0 .. count - 1.

// The point of bin k (< M), which the span holds.
uint span_point(uint k, uint first, uint length) { return k >= first ? k - first : k + length - first; }

// The bin at point j (< the span's count).
uint span_bin(uint j, uint first, uint length) { return j < length - first ? first + j : j - (length - first); }
