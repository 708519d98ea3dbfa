#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// encoder_bwd_wpe: dwpe[t, c] += sum over b = 0, 1, ... B-1 (in that order) of dout[b, t, c].
// One invocation per (t, c), grid-stride over T*C; neighbouring invocations read neighbouring
// channels. Deterministic: every sum has a fixed order and one writer.
// WIDE = 1 (dout holds more elements than one dispatch may index): the address of each batch
// row of dout (T*C floats) is formed with 64-bit arithmetic (addr64.glsl) and indexed by i only;
// the sum is the same, in the same order.
layout(constant_id = 3) const uint WIDE = 0;
layout(push_constant) uniform Push {
    Floats dwpe; // (>= T, C), accumulated
    Floats dout; // (B, T, C)
    uint B, TC;
} p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.TC; i += grid_stride_x()) {
        float acc = 0.0;
        if (WIDE == 1) {
            uvec2 row = uvec2(p.dout);
            const uvec2 step = a64_step(p.TC);
            for (uint b = 0; b < p.B; b++) {
                acc += Floats(row).v[i];
                row = a64_add(row, step);
            }
        } else {
            for (uint b = 0; b < p.B; b++)
                acc += p.dout.v[b * p.TC + i];
        }
        p.dwpe.v[i] += acc;
    }
}
