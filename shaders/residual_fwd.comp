#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// residual_fwd: out[i] = a[i] + b[i] (out may alias a or b).
layout(push_constant) uniform Push {
    Floats out_;
    Floats a;
    Floats b;
    uint n;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x())
        p.out_.v[i] = p.a.v[i] + p.b.v[i];
}
