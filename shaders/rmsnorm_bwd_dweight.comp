#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// rmsnorm_bwd_dweight: column sums over the N rows, with norm = x * rstd[n]:
//   dweight[c] += sum_n norm[n, c] * dout[n, c].
// Deterministic without atomics, the order of layernorm_bwd_dparams.comp: a workgroup is CX
// channels (x) by RY row lanes (y); lane y sums rows y, y + RY, ... in order, then invocation
// (x, 0) adds the RY lane sums in order 0..RY-1 and is the only writer of its channel.
// Workgroups grid-stride over blocks of CX channels.
// CHUNKED = 1 (GPUs; the device tuning's grad_reduce_chunks): lane y sums instead the contiguous
// chunk of rows [y * ceil(N / RY), (y + 1) * ceil(N / RY)) in order, and the chunk sums are added
// in order as above.
// WIDE = 1 (dout and inp hold more elements than one dispatch may index): each lane walks the
// addresses of its rows (and of their rstd) with 64-bit arithmetic (addr64.glsl) and indexes by
// the channel only; the sums are the same, in the same order.
layout(constant_id = 3) const uint WIDE = 0;
layout(constant_id = 4) const uint CHUNKED = 0;
// INP_BF16 = 1 (mixed precision): inp is bf16 (C even), read widened; the wide variant steps its
// rows by C / 2 words.
layout(constant_id = 5) const uint INP_BF16 = 0;
layout(push_constant) uniform Push {
    Floats dweight; // (C), accumulated
    Floats dout;    // (N, C)
    Floats inp;     // (N, C)
    Floats rstd;    // (N)
    uint N, C;
} p;

shared float s_part[gl_WorkGroupSize.x * gl_WorkGroupSize.y];

void main()
{
    const uint CX = gl_WorkGroupSize.x, RY = gl_WorkGroupSize.y;
    uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    // this lane's rows: n0, n0 + nstep, ... below n1
    uint per = (p.N + RY - 1) / RY;
    uint n0 = CHUNKED == 1 ? min(p.N, ly * per) : ly;
    uint n1 = CHUNKED == 1 ? min(p.N, n0 + per) : p.N, nstep = CHUNKED == 1 ? 1 : RY;
    for (uint cb = gl_WorkGroupID.x * CX; cb < p.C; cb += gl_NumWorkGroups.x * CX) {
        uint c = cb + lx;
        float acc = 0.0;
        if (c < p.C && WIDE == 1) {
            uint xw = INP_BF16 == 1 ? p.C / 2 : p.C; // words per row of inp
            uvec2 d_row = a64_row(uvec2(p.dout), n0, p.C), x_row = a64_row(uvec2(p.inp), n0, xw);
            uvec2 r_at = a64_elem(uvec2(p.rstd), n0);
            const uvec2 row_step = a64_row(uvec2(0), nstep, p.C), one_step = a64_step(nstep);
            const uvec2 x_step = a64_row(uvec2(0), nstep, xw);
            for (uint n = n0; n < n1; n += nstep) {
                float x = INP_BF16 == 1 ? bf16_load(Uints(x_row), c) : Floats(x_row).v[c];
                acc += x * Floats(r_at).v[0] * Floats(d_row).v[c];
                d_row = a64_add(d_row, row_step);
                x_row = a64_add(x_row, x_step);
                r_at = a64_add(r_at, one_step);
            }
        } else if (c < p.C) {
            for (uint n = n0; n < n1; n += nstep) {
                float x = INP_BF16 == 1 ? bf16_load(Uints(uvec2(p.inp)), n * p.C + c)
                                        : p.inp.v[n * p.C + c];
                acc += x * p.rstd.v[n] * p.dout.v[n * p.C + c];
            }
        }
        s_part[ly * CX + lx] = acc;
        barrier();
        if (ly == 0 && c < p.C) {
            float sum = s_part[lx];
            for (uint y = 1; y < RY; y++)
                sum += s_part[y * CX + lx];
            p.dweight.v[c] += sum;
        }
        barrier(); // s_part is free again
    }
}
