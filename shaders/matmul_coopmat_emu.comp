#version 460
#extension GL_GOOGLE_include_directive : require
// The cooperative-matrix matmul (matmul_coopmat.glsl) with its fragment operations done as plain
// arithmetic on the same shared tiles: the kernel's every other part on any device.
#define COOPMAT_EMULATE 1
#include "common.glsl"
#include "gelu.glsl"
#include "matmul_coopmat.glsl"
