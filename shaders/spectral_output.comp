#version 450
// Spectral attention, the value sum, pass 2: item (query head, dim pair) adds the blocks'
// partial sums to the held slots' share and writes query first_query's output (f16 as whole
// words).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HEAD_DIM = 128;
layout(constant_id = 2) const bool OUT_F16 = false;

layout(binding = 0) readonly buffer Partials { vec2 partials[]; };     // [rows][num_blocks][HEAD_DIM / 2]
layout(binding = 1) readonly buffer HeldOutput { float held_out[]; };  // [rows][HEAD_DIM]
layout(binding = 2) writeonly buffer Out { uint out_words[]; };        // [rows][HEAD_DIM]

layout(push_constant) uniform Push {
  uint rows;  // query heads
  uint num_blocks;
  uint first_query;
} push;

void main() {
  const uint pairs = HEAD_DIM / 2u;
  const uint items = push.rows * pairs;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint pair = item % pairs, row = item / pairs;
    const uint element = row * HEAD_DIM + 2u * pair;
    vec2 sum = vec2(held_out[element], held_out[element + 1u]);
    for (uint block = 0; block < push.num_blocks; ++block) sum += partials[(row * push.num_blocks + block) * pairs + pair];
    const uint out_element = push.first_query * push.rows * HEAD_DIM + element;
    if (OUT_F16) {
      out_words[out_element >> 1] = packHalf2x16(sum);
    } else {
      out_words[out_element] = floatBitsToUint(sum.x);
      out_words[out_element + 1u] = floatBitsToUint(sum.y);
    }
  }
}
