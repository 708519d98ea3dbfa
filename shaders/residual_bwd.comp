#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// residual_bwd: da[i] += dout[i]; db[i] += dout[i], in that order per element (so da == db
// adds twice, as the reference does).
layout(push_constant) uniform Push {
    Floats da; // accumulated
    Floats db; // accumulated
    Floats dout;
    uint n;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x()) {
        float d = p.dout.v[i];
        p.da.v[i] += d;
        p.db.v[i] += d;
    }
}
