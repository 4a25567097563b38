// The eviction kernels' choice of a victim (eviction_step.comp, eviction_scores_kernel.glsl and
// evict_one_kernel.glsl; the rules of ops/eviction_step.h): the lowest (score, rank) over a
// workgroup, and TreeKV's choice within its scope. The includer enables GL_KHR_shader_subgroup_basic and _arithmetic and declares WG,
// its workgroup size.

const uint NONE = 0xFFFFFFFFu;

// Per subgroup, its lowest candidate (a subgroup may have a single lane: WG entries).
shared float lowest_score_s[WG];
shared uint lowest_rank_s[WG];
shared uint lowest_slot_s[WG];

// Threads read what other threads of the workgroup wrote to buffers and shared memory.
void sync() {
  memoryBarrierBuffer();
  memoryBarrierShared();
  barrier();
}

// (score, rank) a before b: lower score, ties to the lower rank; NONE ranks last.
bool before(float score_a, uint rank_a, float score_b, uint rank_b) {
  return rank_a != NONE && (rank_b == NONE || score_a < score_b || (score_a == score_b && rank_a < rank_b));
}

// A thread's running lowest candidate: (score, rank) and the slot holding it.
struct Lowest {
  float score;
  uint rank;
  uint slot;
};

// A thread without a candidate: score +inf (glslang folds no bit cast into a constant).
Lowest no_candidate() { return Lowest(uintBitsToFloat(0x7F800000u), NONE, NONE); }

void note_candidate(float score, uint rank, uint slot, uint first, uint end, inout Lowest lowest) {
  if (rank >= first && rank < end && before(score, rank, lowest.score, lowest.rank)) lowest = Lowest(score, rank, slot);
}

// The subgroup's lowest (score, rank), in every lane: ranks are distinct, so the lowest score
// and then the lowest rank among the lanes that hold it are the order's minimum.
Lowest subgroup_lowest(Lowest lowest) {
  const float score = subgroupMin(lowest.score);
  const uint rank = subgroupMin(lowest.score == score ? lowest.rank : NONE);
  return Lowest(score, rank, subgroupMin(lowest.rank == rank ? lowest.slot : NONE));
}

// The workgroup's lowest candidate, in every thread: subgroups, then one barrier, then every
// subgroup folds the subgroups' results itself (no second barrier to broadcast one). With
// `order_buffers` the barrier also orders the workgroup's buffer writes before it (a score
// pass's) before its reads after (an eviction's), at the cost of waiting for those writes; the
// shared entries are rewritten only by a later call, after another barrier.
Lowest reduce_lowest(Lowest lowest, bool order_buffers) {
  lowest = subgroup_lowest(lowest);
  if (subgroupElect()) {
    lowest_score_s[gl_SubgroupID] = lowest.score;
    lowest_rank_s[gl_SubgroupID] = lowest.rank;
    lowest_slot_s[gl_SubgroupID] = lowest.slot;
  }
  if (order_buffers) memoryBarrierBuffer();
  memoryBarrierShared();
  barrier();
  Lowest folded = no_candidate();
  for (uint i = gl_SubgroupInvocationID; i < gl_NumSubgroups; i += gl_SubgroupSize)
    if (before(lowest_score_s[i], lowest_rank_s[i], folded.score, folded.rank))
      folded = Lowest(lowest_score_s[i], lowest_rank_s[i], lowest_slot_s[i]);
  return subgroup_lowest(folded);
}

// TreeKV's scope: the ranks left and left + 1.
bool in_scope(uint rank, uint left) { return rank == left || rank == left + 1; }

// Which of the scope's ranks leaves (0: left, 1: left + 1), by Algorithm 1: the less important,
// S / C, compared as S_a C_b > S_b C_a without a division (C > 0): products are correctly
// rounded on every Vulkan device, division is not, and the CPU reference compares the same
// products.
uint tree_leaving(float sum_left, uint count_left, float sum_right, uint count_right) {
  precise const float left_side = sum_left * float(count_right);
  precise const float right_side = sum_right * float(count_left);
  return left_side > right_side ? 1u : 0u;
}
