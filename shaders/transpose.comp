#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// transpose: out (cols, rows) = in (rows, cols)^T. One element per invocation; x runs over the
// output's contiguous dimension so the writes are coalesced.
layout(push_constant) uniform Push {
    Floats out_;
    Floats in_;
    uint rows, cols;
} p;

void main()
{
    uint r = gl_GlobalInvocationID.x; // output column = input row
    uint c = gl_GlobalInvocationID.y; // output row = input column
    if (r < p.rows && c < p.cols)
        p.out_.v[c * p.rows + r] = p.in_.v[r * p.cols + c];
}
