#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// qknorm_bwd_dweight: the gradient of one of qknorm_fwd.comp's weights (q's: heads [0, NH), or
// k's: heads [NH, NH + NKV)), column sums over the R = rows * nheads head rows of D:
//   dweight[c] += sum_r norm[r, c] * dout[r, c],  norm = x * rstd of head row r.
// Head row r is position r / nheads, head head0 + r % nheads. Deterministic without atomics, the
// order of rmsnorm_bwd_dweight.comp: CX channels (x) by RY row lanes (y); lane y sums head rows
// y, y + RY, ... (CHUNKED = 1: the contiguous chunk y of ceil(R / RY) head rows) in order, then
// invocation (x, 0) adds the RY lane sums in order and is the only writer of its channel. A lane
// sums its head rows (rows * heads of them: many) with Neumaier's compensated summation, so that
// its sum is accurate to about an ulp however many there are (plain fp32 sums of random-signed
// terms lose about sqrt(count) ulps: 6.8e-6 relative over 32800 rows in test_qknorm).
layout(constant_id = 3) const uint CHUNKED = 0;
layout(push_constant) uniform Push {
    Floats dweight; // (D), accumulated
    Floats dout;    // (rows, W)
    Floats qkv;     // (rows, W)
    Floats rstd;    // (rows, NH + NKV)
    uint rows, NH, NKV, D, head0, nheads;
} p;

shared float s_part[gl_WorkGroupSize.x * gl_WorkGroupSize.y];

void main()
{
    const uint CX = gl_WorkGroupSize.x, RY = gl_WorkGroupSize.y;
    uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    uint R = p.rows * p.nheads, hk = p.NH + p.NKV, ha = hk + p.NKV;
    uint per = (R + RY - 1) / RY;
    uint r0 = CHUNKED == 1 ? min(R, ly * per) : ly;
    uint r1 = CHUNKED == 1 ? min(R, r0 + per) : R, rstep = CHUNKED == 1 ? 1 : RY;
    for (uint cb = gl_WorkGroupID.x * CX; cb < p.D; cb += gl_NumWorkGroups.x * CX) {
        uint c = cb + lx;
        precise float acc = 0.0, comp = 0.0; // Neumaier: acc + comp is the lane's sum
        for (uint r = r0; c < p.D && r < r1; r += rstep) {
            uint row = r / p.nheads, h = p.head0 + (r - row * p.nheads);
            uint at = (row * ha + h) * p.D + c;
            precise float v = p.qkv.v[at] * p.rstd.v[row * hk + h] * p.dout.v[at];
            precise float t = acc + v;
            comp += abs(acc) >= abs(v) ? (acc - t) + v : (v - t) + acc;
            acc = t;
        }
        s_part[ly * CX + lx] = acc + comp;
        barrier();
        if (ly == 0 && c < p.D) {
            float sum = s_part[lx];
            for (uint y = 1; y < RY; y++)
                sum += s_part[y * CX + lx];
            p.dweight.v[c] += sum;
        }
        barrier(); // s_part is free again
    }
}
