#version 450
// evict_one_kernel.glsl for one layer a dispatch: its binding arrays have one element, read at
// the constant index 0 (evict_one_layers.comp takes many layers).
#extension GL_GOOGLE_include_directive : require
#define KVC_LAYER 0u
#include "evict_one_kernel.glsl"
