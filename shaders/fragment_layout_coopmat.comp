#version 450
// Where a subgroup's lanes hold the elements of a 16 x 16 cooperative matrix (the extension
// leaves it to the device): one subgroup loads a matrix whose element (row, col) is
// row * 16 + col, once as an f16 A matrix and once as an f32 accumulator, and writes what each
// lane's element i holds. The host (vulkan/fragment_layout.h) reads the map back and decides
// whether the kernels may work on accumulator elements by row.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x = 32) in;

// [0, 256): lane l's element i of the A matrix at l * 8 + i (-1 past its length); [256, 512):
// the accumulator's likewise; [512], [513]: the two lengths.
layout(binding = 0) writeonly buffer Positions { float positions[]; };

const uint MAT = 16;
const uint MAX_ELEMENTS = 8;  // what a 32-wide subgroup holds of 256 elements, where none repeat

// Row-major sources in 16-byte items (cooperative-matrix loads want 16-byte strides): the A
// source's rows are 2 items of 8 halves, the accumulator's 4 items of 4 floats.
shared uvec4 a_source[MAT * 2];
shared uvec4 c_source[MAT * 4];

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint row = lane >> 1, half_row = lane & 1u;
  const float first = float(row * MAT + half_row * 8u);
  a_source[lane] = uvec4(packHalf2x16(vec2(first, first + 1.0)), packHalf2x16(vec2(first + 2.0, first + 3.0)),
                         packHalf2x16(vec2(first + 4.0, first + 5.0)), packHalf2x16(vec2(first + 6.0, first + 7.0)));
  c_source[2u * lane] = floatBitsToUint(vec4(first, first + 1.0, first + 2.0, first + 3.0));
  c_source[2u * lane + 1u] = floatBitsToUint(vec4(first + 4.0, first + 5.0, first + 6.0, first + 7.0));
  barrier();

  coopmat<float16_t, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseA> a;
  coopmat<float, gl_ScopeSubgroup, MAT, MAT, gl_MatrixUseAccumulator> c;
  coopMatLoad(a, a_source, 0, 2, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(c, c_source, 0, 4, gl_CooperativeMatrixLayoutRowMajor);
  for (uint i = 0; i < MAX_ELEMENTS; ++i) {
    positions[lane * MAX_ELEMENTS + i] = i < a.length() ? float(a[i]) : -1.0;
    positions[256u + lane * MAX_ELEMENTS + i] = i < c.length() ? c[i] : -1.0;
  }
  if (lane == 0u) {
    positions[512] = float(a.length());
    positions[513] = float(c.length());
  }
}
