// Where a decode step's scoring (eviction_scores_kernel.glsl) leaves its candidates for the
// victim, which evict_one_kernel.glsl reads: per kv head push.entries entries of ENTRY_WORDS words,
// (score bits, rank, slot) of a slot block's lowest under the lowest-score rules, (S bits, C,
// slot) of the tree scope's ranks left (entry 0) and left + 1 (entry 1) under the tree rules.
// The includer declares candidates[] and push.entries.
const uint ENTRY_WORDS = 3;

uint entry_at(uint kv_head, uint entry) { return (kv_head * push.entries + entry) * ENTRY_WORDS; }
