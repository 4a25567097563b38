#version 450
// evict_one_kernel.glsl for LAYERS layers a dispatch, the grid's z: the binding arrays are
// indexed by it, a value uniform per workgroup (shaderStorageBufferArrayDynamicIndexing).
#extension GL_GOOGLE_include_directive : require
#define KVC_LAYER gl_WorkGroupID.z
#include "evict_one_kernel.glsl"
