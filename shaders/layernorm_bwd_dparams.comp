#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "addr64.glsl"
// layernorm_bwd_dparams: column sums over the N rows, with norm = (x - mean[n]) * rstd[n]:
//   dweight[c] += sum_n norm[n, c] * dout[n, c];   dbias[c] += sum_n dout[n, c].
// Deterministic without atomics: a workgroup is CX channels (x) by RY row lanes (y); lane y sums
// rows y, y + RY, ... in order, then invocation (x, 0) adds the RY lane sums in order 0..RY-1 and
// is the only writer of its channel. Workgroups grid-stride over blocks of CX channels.
// WIDE = 1 (dout and inp hold more elements than one dispatch may index): each lane walks the
// addresses of its rows (and of their mean and rstd) with 64-bit arithmetic (addr64.glsl) and
// indexes by the channel only; the sums are the same, in the same order.
layout(constant_id = 3) const uint WIDE = 0;
layout(push_constant) uniform Push {
    Floats dweight; // (C), accumulated
    Floats dbias;   // (C), accumulated
    Floats dout;    // (N, C)
    Floats inp;     // (N, C)
    Floats mean;    // (N)
    Floats rstd;    // (N)
    uint N, C;
} p;

shared vec2 s_part[gl_WorkGroupSize.x * gl_WorkGroupSize.y];

void main()
{
    const uint CX = gl_WorkGroupSize.x, RY = gl_WorkGroupSize.y;
    uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    for (uint cb = gl_WorkGroupID.x * CX; cb < p.C; cb += gl_NumWorkGroups.x * CX) {
        uint c = cb + lx;
        vec2 acc = vec2(0.0); // (dweight, dbias)
        if (c < p.C && WIDE == 1) {
            uvec2 d_row = a64_row(uvec2(p.dout), ly, p.C), x_row = a64_row(uvec2(p.inp), ly, p.C);
            uvec2 m_at = a64_elem(uvec2(p.mean), ly), r_at = a64_elem(uvec2(p.rstd), ly);
            const uvec2 row_step = a64_row(uvec2(0), RY, p.C), one_step = a64_step(RY);
            for (uint n = ly; n < p.N; n += RY) {
                float d = Floats(d_row).v[c];
                float norm = (Floats(x_row).v[c] - Floats(m_at).v[0]) * Floats(r_at).v[0];
                acc += vec2(norm * d, d);
                d_row = a64_add(d_row, row_step);
                x_row = a64_add(x_row, row_step);
                m_at = a64_add(m_at, one_step);
                r_at = a64_add(r_at, one_step);
            }
        } else if (c < p.C) {
            for (uint n = ly; n < p.N; n += RY) {
                float d = p.dout.v[n * p.C + c];
                float norm = (p.inp.v[n * p.C + c] - p.mean.v[n]) * p.rstd.v[n];
                acc += vec2(norm * d, d);
            }
        }
        s_part[ly * CX + lx] = acc;
        barrier();
        if (ly == 0 && c < p.C) {
            vec2 sum = s_part[lx];
            for (uint y = 1; y < RY; y++)
                sum += s_part[y * CX + lx];
            p.dweight.v[c] += sum.x;
            p.dbias.v[c] += sum.y;
        }
        barrier(); // s_part is free again
    }
}
