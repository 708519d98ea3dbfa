#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// encoder_bwd_wpe: dwpe[t, c] += sum over b = 0, 1, ... B-1 (in that order) of dout[b, t, c].
// One invocation per (t, c), grid-stride over T*C; neighbouring invocations read neighbouring
// channels. Deterministic: every sum has a fixed order and one writer.
layout(push_constant) uniform Push {
    Floats dwpe; // (>= T, C), accumulated
    Floats dout; // (B, T, C)
    uint B, TC;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.TC; i += grid_stride_x()) {
        float acc = 0.0;
        for (uint b = 0; b < p.B; b++)
            acc += p.dout.v[b * p.TC + i];
        p.dwpe.v[i] += acc;
    }
}
