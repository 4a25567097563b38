// A prefix sum over the workgroup, shared by top_k and window_hit_threshold: each subgroup scans
// its lanes (subgroup arithmetic, which the device must offer), then each thread adds the totals
// of the subgroups before its own, one barrier in all (a Hillis-Steele scan over 1024 threads
// took 20, most of a radix pass's time). The includer enables GL_KHR_shader_subgroup_arithmetic.
// The whole workgroup calls it; a barrier must separate one call's reads of the subgroup
// totals from the next call's writes.

shared uint workgroup_scan_s[gl_WorkGroupSize.x];  // the subgroups' totals (at most one a thread)
uint workgroup_scan_total_value;

// The sum of `value` over threads 0 .. this one.
uint workgroup_inclusive_sum(uint value) {
  const uint within = subgroupInclusiveAdd(value);
  // The subgroup's last lane holds its total (workgroups are whole subgroups: the host's sizes
  // are powers of two of at least 256 threads).
  if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u) workgroup_scan_s[gl_SubgroupID] = within;
  barrier();
  uint before = 0u, total = 0u;
  for (uint subgroup = 0u; subgroup < gl_NumSubgroups; ++subgroup) {
    const uint subgroup_total = workgroup_scan_s[subgroup];
    before += subgroup < gl_SubgroupID ? subgroup_total : 0u;
    total += subgroup_total;
  }
  workgroup_scan_total_value = total;
  return before + within;
}

// The sum over the whole workgroup of the last call's values.
uint workgroup_scan_total() { return workgroup_scan_total_value; }
