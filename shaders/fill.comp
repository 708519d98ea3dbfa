#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// fill: x[i] = value for i < n.
layout(push_constant) uniform Push {
    Floats x;
    uint n;
    float value;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x())
        p.x.v[i] = p.value;
}
