#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// rope_bwd: the rotary position embedding's backward: the gradient of the q and k heads rotated by
// -angle, in place (rope.glsl). The gradient is fp32 (QKV_BF16 = 0).
const float SIGN = -1.0;
#include "rope.glsl"
