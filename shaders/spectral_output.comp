#version 450
// Spectral attention, the value sum, pass 2: a query head's blocks' partial sums added to the
// held slots' shares (one per softmax chunk), written as query first_query's output (f16 as
// whole words). A thread's loads go out BATCH at a time, each batch before any is added: one
// at a time, a query head's hundreds of blocks over four lanes were a chain of trips to memory.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;  // at least HEAD_DIM / 2
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;

layout(binding = 0) readonly buffer Partials { vec2 partials[]; };     // [rows][num_blocks][HEAD_DIM / 2]
layout(binding = 1) readonly buffer HeldOutput { float held_out[]; };  // [rows][held_chunks][HEAD_DIM]
layout(binding = 2) writeonly buffer Out { uint out_words[]; };        // [rows][HEAD_DIM]

layout(push_constant) uniform Push {
  uint rows;  // query heads
  uint num_blocks;
  uint first_query;
  uint held_chunks;
} push;

const uint PAIRS = HEAD_DIM / 2u;
const uint BATCH = 8;
shared vec2 sums_s[gl_WorkGroupSize.x];

// Workgroup per row: thread t adds every lanes-th block of pair t % PAIRS (lanes = workgroup /
// PAIRS threads per pair keep more loads in flight than one thread per pair).
void main() {
  const uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint lanes = gl_WorkGroupSize.x / PAIRS, pair = t % PAIRS, lane = t / PAIRS;
  vec2 sum = vec2(0.0);
  if (lane < lanes) {
    for (uint first = lane; first < push.num_blocks; first += BATCH * lanes) {
      vec2 values[BATCH];
      [[unroll]] for (uint k = 0u; k < BATCH; ++k) {
        const uint block = first + k * lanes;
        values[k] = block < push.num_blocks ? partials[(row * push.num_blocks + block) * PAIRS + pair] : vec2(0.0);
      }
      [[unroll]] for (uint k = 0u; k < BATCH; ++k) sum += values[k];
    }
  }
  // The held shares: lane 0's, loaded before the barrier.
  vec2 held = vec2(0.0);
  if (lane == 0u) {
    for (uint first = 0u; first < push.held_chunks; first += BATCH) {
      vec2 values[BATCH];
      [[unroll]] for (uint k = 0u; k < BATCH; ++k) {
        const uint at = (row * push.held_chunks + first + k) * HEAD_DIM + 2u * pair;
        values[k] = first + k < push.held_chunks ? vec2(held_out[at], held_out[at + 1u]) : vec2(0.0);
      }
      [[unroll]] for (uint k = 0u; k < BATCH; ++k) held += values[k];
    }
  }
  sums_s[t] = sum;
  barrier();
  if (t >= PAIRS) return;
  const uint element = row * HEAD_DIM + 2u * pair;
  sum = held;
  for (uint other = 0u; other < lanes; ++other) sum += sums_s[other * PAIRS + pair];
  const uint out_element = push.first_query * push.rows * HEAD_DIM + element;
  if (OUT_F16) {
    out_words[out_element >> 1] = packHalf2x16(sum);
  } else {
    out_words[out_element] = floatBitsToUint(sum.x);
    out_words[out_element + 1u] = floatBitsToUint(sum.y);
  }
}
