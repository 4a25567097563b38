// FourierAttention's factorized route: the largest middle logit of query heads 2 pair and
// 2 pair + 1 (-inf for a pair's missing second head), the largest of fourier_middle_partials'
// splits' maxima (each split's partial starts with its maximum). Every thread of the workgroup
// gets it; call it in uniform control flow, with a power-of-two workgroup. The includer's push block names num_splits, first_middle_split and middle_splits,
// and HEAD_DIM is the partials' head_dim.
shared vec2 middle_max_s[gl_WorkGroupSize.x];

vec2 pair_middle_max(uint pair, bool has_odd) {
  const uint t = gl_LocalInvocationID.x;
  vec2 local_max = vec2(KVC_NEG_INF);
  for (uint s = t; s < push.middle_splits; s += gl_WorkGroupSize.x) {
    const uint split = push.first_middle_split + s;
    local_max.x = max(local_max.x, partials[(2 * pair * push.num_splits + split) * (HEAD_DIM + 2)]);
    if (has_odd) local_max.y = max(local_max.y, partials[((2 * pair + 1) * push.num_splits + split) * (HEAD_DIM + 2)]);
  }
  middle_max_s[t] = local_max;
  barrier();
  for (uint width = gl_WorkGroupSize.x / 2; width > 0; width /= 2) {
    if (t < width) middle_max_s[t] = max(middle_max_s[t], middle_max_s[t + width]);
    barrier();
  }
  const vec2 result = middle_max_s[0];
  barrier();  // every thread has read it before another call writes
  return result;
}
