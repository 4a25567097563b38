// A prefix sum over the workgroup (Hillis-Steele in shared memory), shared by top_k and
// window_hit_threshold. The whole workgroup calls it; a barrier must separate reading
// workgroup_scan_total() from the next call (which rewrites the shared array).

shared uint workgroup_scan_s[gl_WorkGroupSize.x];

// The sum of `value` over threads 0 .. this one.
uint workgroup_inclusive_sum(uint value) {
  const uint thread = gl_LocalInvocationID.x;
  workgroup_scan_s[thread] = value;
  barrier();
  for (uint offset = 1u; offset < gl_WorkGroupSize.x; offset <<= 1) {
    const uint add = thread >= offset ? workgroup_scan_s[thread - offset] : 0u;
    barrier();
    workgroup_scan_s[thread] += add;
    barrier();
  }
  return workgroup_scan_s[thread];
}

// The sum over the whole workgroup of the last call's values.
uint workgroup_scan_total() { return workgroup_scan_s[gl_WorkGroupSize.x - 1u]; }
