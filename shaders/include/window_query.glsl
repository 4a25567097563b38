// The window kernels' access to the rotated, scaled queries: q_rot[] as
// [window][num_q_heads][HEAD_DIM] f32, with push.num_q_heads declared by the includer.

const uint CHUNKS = HEAD_DIM / 4;

vec4 query_chunk(uint query, uint head, uint c) {
  const uint at = (query * push.num_q_heads + head) * HEAD_DIM + 4 * c;
  return vec4(q_rot[at], q_rot[at + 1], q_rot[at + 2], q_rot[at + 3]);
}
