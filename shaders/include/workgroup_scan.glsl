// A prefix sum over the workgroup, shared by top_k and window_hit_threshold: each subgroup scans
// its lanes (subgroup arithmetic, which the device must offer), then each thread adds the totals
// of the subgroups before its own: one barrier in all, where a Hillis-Steele scan over 1024
// threads took 21. The includer enables GL_KHR_shader_subgroup_arithmetic. "Before" is in
// thread order as long as thread t is lane t % size of subgroup t / size, as every known driver
// lays out a one-dimensional workgroup. The whole workgroup calls it; a barrier must separate
// one call's reads of the subgroup totals from the next call's writes.

shared uint workgroup_scan_s[gl_WorkGroupSize.x];  // the subgroups' totals (at most one a thread)
uint workgroup_scan_total_value;

// The sum of `value` over threads 0 .. this one.
uint workgroup_inclusive_sum(uint value) {
  const uint within = subgroupInclusiveAdd(value);
  // The total from subgroupAdd, not from the last lane's scan: gl_SubgroupSize may exceed the
  // lanes a subgroup really has (Intel's drivers report 32 and may run 8 or 16 wide).
  const uint subgroup_total = subgroupAdd(value);
  if (subgroupElect()) workgroup_scan_s[gl_SubgroupID] = subgroup_total;
  barrier();
  uint before = 0u, total = 0u;
  for (uint subgroup = 0u; subgroup < gl_NumSubgroups; ++subgroup) {
    const uint each = workgroup_scan_s[subgroup];
    before += subgroup < gl_SubgroupID ? each : 0u;
    total += each;
  }
  workgroup_scan_total_value = total;
  return before + within;
}

// The sum over the whole workgroup of the last call's values.
uint workgroup_scan_total() { return workgroup_scan_total_value; }
