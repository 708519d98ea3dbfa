#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// matmul_bwd_bias: dbias[c] += sum over rows r of dout[r, c]; deterministic, no atomics.
// CHUNKED = 0 (CPU devices): each column is summed by one invocation in row order (neighbouring
// lanes read neighbouring columns); the workgroup is (WG, 1).
// CHUNKED = 1 (GPUs; the device tuning's grad_reduce_chunks): a workgroup is CX columns (x) by RY
// row chunks (y). The rows are cut into RY contiguous chunks of ceil(rows / RY) (a partition
// fixed by rows and RY alone); lane y sums its chunk's rows in order, then invocation (x, 0) adds
// the RY chunk sums in order 0..RY-1 and is the only writer of its column. Run to run the bits
// are the same; they differ from CHUNKED = 0's (another order of additions).
// WIDE = 1 (dout holds more elements than one dispatch may index): the address of each row of
// dout is formed with 64-bit arithmetic (addr64.glsl) and indexed by the column only; the sums
// are the same.
layout(constant_id = 3) const uint WIDE = 0;
layout(constant_id = 4) const uint CHUNKED = 0;

layout(push_constant) uniform Push {
    Floats dbias;
    Floats dout;
    uint rows, cols;
} p;

shared float s_part[CHUNKED == 1 ? gl_WorkGroupSize.x * gl_WorkGroupSize.y : 1];

// Sum of dout[r, c] over rows r in [r0, r1), in order.
float column_sum(uint c, uint r0, uint r1)
{
    float sum = 0.0;
    if (WIDE == 1) {
        uvec2 row = a64_row(uvec2(p.dout), r0, p.cols);
        const uvec2 step = a64_step(p.cols);
        for (uint r = r0; r < r1; r++) {
            sum += Floats(row).v[c];
            row = a64_add(row, step);
        }
    } else {
        for (uint r = r0; r < r1; r++)
            sum += p.dout.v[r * p.cols + c];
    }
    return sum;
}

void main()
{
    if (CHUNKED == 0) {
        uint c = gl_GlobalInvocationID.x;
        if (c < p.cols)
            p.dbias.v[c] += column_sum(c, 0, p.rows);
        return;
    }
    const uint CX = gl_WorkGroupSize.x, RY = gl_WorkGroupSize.y;
    uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    uint c = gl_WorkGroupID.x * CX + lx, per = (p.rows + RY - 1) / RY;
    uint r0 = min(p.rows, ly * per), r1 = min(p.rows, r0 + per);
    s_part[ly * CX + lx] = c < p.cols ? column_sum(c, r0, r1) : 0.0;
    barrier();
    if (ly == 0 && c < p.cols) {
        float sum = s_part[lx];
        for (uint y = 1; y < RY; y++)
            sum += s_part[y * CX + lx];
        p.dbias.v[c] += sum;
    }
}
