// Radix selection of the k-th largest 32-bit key of the workgroup's row, shared by top_k and
// window_hit_threshold. The includer defines `uint select_key(uint i)` (the key of position
// i) and includes workgroup_scan.glsl before including this file; the whole workgroup, of at
// least 256 threads (a power of two), calls radix_select.
// Three passes (digits of 11, 11 and 10 bits) build a histogram of the next digit among the
// keys that match the prefix found so far and descend into the bin holding the k-th key: a pass
// reads the whole row, so three digits read it three times where four of 8 bits read it four
// (window_hit_threshold's passes were bound by the copy bandwidth: 512 MiB a layer at the
// kvc-bench shape). A thread adds a run of keys falling into the same bin as one atomic: a
// row's keys crowd into a few bins in the first pass (the probabilities of a 32K row share one
// exponent), and atomics on one shared address serialise (one per key made top_k of 1024 rows
// of 32K 0.45 ms on the H100). Keys are read RADIX_BATCH at a time before any is counted, so
// that a thread has that many loads in flight instead of one (a pass over a 32K row was
// latency-bound).

const uint RADIX_BATCH = 8;
const uint RADIX_BINS = 2048;  // of the widest digit
const uint RADIX_BINS_PER_THREAD = RADIX_BINS / gl_WorkGroupSize.x;  // in the search for the k-th key's bin

shared uint radix_histogram[RADIX_BINS];
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
  for (uint pass = 0u; pass < 3u; ++pass) {
    const uint shift = pass == 0u ? 21u : (pass == 1u ? 10u : 0u);
    const uint digit_mask = pass == 2u ? 1023u : 2047u;
    for (uint bin = thread; bin < RADIX_BINS; bin += gl_WorkGroupSize.x) radix_histogram[bin] = 0u;
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
        const uint bin = (keys[b] >> shift) & digit_mask;
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
    // total reaches `remaining`. Thread t takes RADIX_BINS_PER_THREAD bins down from the top
    // bin less t times as many, one scan adds the threads' totals, and the thread whose bins
    // cross `remaining` walks them (where thread 0 once walked every bin while the workgroup
    // waited).
    const uint top_bin = RADIX_BINS - 1u - thread * RADIX_BINS_PER_THREAD;
    uint count = 0u;
    for (uint b = 0u; b < RADIX_BINS_PER_THREAD; ++b) count += radix_histogram[top_bin - b];
    const uint through = workgroup_inclusive_sum(count);
    uint before = through - count;
    if (before < remaining && through >= remaining) {
      for (uint b = 0u; b < RADIX_BINS_PER_THREAD; ++b) {
        const uint in_bin = radix_histogram[top_bin - b];
        if (before + in_bin >= remaining) {
          radix_found_prefix = prefix | ((top_bin - b) << shift);
          radix_found_remaining = remaining - before;
          break;
        }
        before += in_bin;
      }
    }
    barrier();
    prefix = radix_found_prefix;
    remaining = radix_found_remaining;
    bin_size = radix_histogram[(prefix >> shift) & digit_mask];
    mask |= digit_mask << shift;
    barrier();  // the histogram and radix_found_* are rewritten by the next pass
  }
  return RadixSelection(prefix, remaining, bin_size);
}
