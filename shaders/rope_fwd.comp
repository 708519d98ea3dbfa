#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// rope_fwd: the rotary position embedding of the q and k heads, in place (rope.glsl).
const float SIGN = 1.0;
#include "rope.glsl"
