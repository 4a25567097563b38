// Radix selection of the k-th largest 32-bit key of the workgroup's row, shared by top_k and
// window_hit_threshold. The includer defines `uint select_key(uint i)` (the key of position
// i) and includes workgroup_scan.glsl before including this file; the whole workgroup, of at
// least 256 threads, calls radix_select.
// Four passes build a 256-bin histogram of the next 8 bits among the keys that match the
// prefix found so far and descend into the bin holding the k-th key. A thread adds a run of
// keys falling into the same bin as one atomic: a row's keys crowd into a few bins in the
// first passes (the probabilities of a 32K row share one exponent), and atomics on one
// shared address serialise (one per key made top_k of 1024 rows of 32K 0.45 ms on the H100).
// Keys are read RADIX_BATCH at a time before any is counted, so that a thread has that many
// loads in flight instead of one (a pass over a 32K row was latency-bound).

const uint RADIX_BATCH = 8;

shared uint radix_histogram[256];
shared uint radix_found_prefix;
shared uint radix_found_remaining;

struct RadixSelection {
  uint threshold;     // the k-th largest key T
  uint needed_equal;  // how many keys equal to T the top k take (the earliest ones)
  uint equal_count;   // how many keys equal T in the row
};

RadixSelection radix_select(uint row_length, uint k) {
  const uint thread = gl_LocalInvocationID.x;
  uint prefix = 0u, mask = 0u, remaining = k, bin_size = 0u;
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (thread < 256u) radix_histogram[thread] = 0u;
    barrier();
    uint run_bin = 0u, run_length = 0u;
    for (uint first = thread; first < row_length; first += RADIX_BATCH * gl_WorkGroupSize.x) {
      uint keys[RADIX_BATCH];
      for (uint b = 0; b < RADIX_BATCH; ++b) {
        const uint i = first + b * gl_WorkGroupSize.x;
        keys[b] = i < row_length ? select_key(i) : 0u;
      }
      for (uint b = 0; b < RADIX_BATCH; ++b) {
        if (first + b * gl_WorkGroupSize.x >= row_length || (keys[b] & mask) != prefix) continue;
        const uint bin = (keys[b] >> uint(shift)) & 255u;
        if (bin != run_bin && run_length > 0u) {
          atomicAdd(radix_histogram[run_bin], run_length);
          run_length = 0u;
        }
        run_bin = bin;
        ++run_length;
      }
    }
    if (run_length > 0u) atomicAdd(radix_histogram[run_bin], run_length);
    barrier();
    // The bin holding the k-th key: counting down from the top bin, the first whose running
    // total reaches `remaining`. Thread t takes bin 255 - t and one scan adds them, so the
    // thread whose bin crosses `remaining` knows it (where thread 0 walked up to 256 bins while
    // the workgroup waited).
    const uint count = thread < 256u ? radix_histogram[255u - thread] : 0u;
    const uint through = workgroup_inclusive_sum(count);
    if (through - count < remaining && through >= remaining) {
      radix_found_prefix = prefix | ((255u - thread) << uint(shift));
      radix_found_remaining = remaining - (through - count);
    }
    barrier();
    prefix = radix_found_prefix;
    remaining = radix_found_remaining;
    bin_size = radix_histogram[(prefix >> uint(shift)) & 255u];
    mask |= 255u << uint(shift);
    barrier();  // the histogram and radix_found_* are rewritten by the next pass
  }
  return RadixSelection(prefix, remaining, bin_size);
}
