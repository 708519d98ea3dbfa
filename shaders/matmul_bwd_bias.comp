#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// matmul_bwd_bias: dbias[c] += sum over rows r of dout[r, c], each column summed by one
// invocation in row order (deterministic, no atomics; neighbouring lanes read neighbouring columns).
// WIDE = 1 (dout holds more elements than one dispatch may index): the address of each row of
// dout is formed with 64-bit arithmetic (addr64.glsl) and indexed by the column only; the sum is
// the same.
layout(constant_id = 3) const uint WIDE = 0;

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
    if (WIDE == 1) {
        uvec2 row = uvec2(p.dout);
        const uvec2 step = a64_step(p.cols);
        for (uint r = 0; r < p.rows; r++) {
            sum += Floats(row).v[c];
            row = a64_add(row, step);
        }
    } else {
        for (uint r = 0; r < p.rows; r++)
            sum += p.dout.v[r * p.cols + c];
    }
    p.dbias.v[c] += sum;
}
