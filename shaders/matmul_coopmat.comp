#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
// The cooperative-matrix matmul (matmul_coopmat.glsl) on the device's fragments.
#define COOPMAT_EMULATE 0
#include "common.glsl"
#include "gelu.glsl"
#include "matmul_coopmat.glsl"
