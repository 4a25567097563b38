// FourierAttention's factorized route: the largest middle logit of query heads 2 pair and
// 2 pair + 1 (-inf for a pair's missing second head), the largest of fourier_middle_partials'
// splits' maxima (each split's partial starts with its maximum). Every thread of the workgroup
// gets it; call it in uniform control flow. The includer enables GL_KHR_shader_subgroup_basic
// and _arithmetic; its push block names num_splits, first_middle_split and middle_splits, and
// HEAD_DIM is the partials' head_dim. Each subgroup's maximum, then one pass over them: two
// barriers, where a tree over the workgroup took one a level (ten at 1024 threads).
shared vec2 middle_max_s[gl_WorkGroupSize.x];  // a subgroup's entry each (subgroups may be one lane wide)

vec2 pair_middle_max(uint pair, bool has_odd) {
  vec2 local_max = vec2(KVC_NEG_INF);
  for (uint s = gl_LocalInvocationID.x; s < push.middle_splits; s += gl_WorkGroupSize.x) {
    const uint split = push.first_middle_split + s;
    local_max.x = max(local_max.x, partials[(2 * pair * push.num_splits + split) * (HEAD_DIM + 2)]);
    if (has_odd) local_max.y = max(local_max.y, partials[((2 * pair + 1) * push.num_splits + split) * (HEAD_DIM + 2)]);
  }
  local_max = subgroupMax(local_max);
  if (subgroupElect()) middle_max_s[gl_SubgroupID] = local_max;
  barrier();
  vec2 result = middle_max_s[0];
  for (uint s = 1; s < gl_NumSubgroups; ++s) result = max(result, middle_max_s[s]);
  barrier();  // every thread has read it before another call writes
  return result;
}
