#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// matmul_bwd_bias: dbias[c] += sum over rows r of dout[r, c], each column summed by one
// invocation in row order (deterministic, no atomics; neighbouring lanes read neighbouring columns).
layout(push_constant) uniform Push {
    Floats dbias;
    Floats dout;
    uint rows, cols;
} p;

void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.cols)
        return;
    float sum = 0.0;
    for (uint r = 0; r < p.rows; r++)
        sum += p.dout.v[r * p.cols + c];
    p.dbias.v[c] += sum;
}
