#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// attention_fwd_pv: the products of a head's causal (T,T) matrix P with a (T,hs) matrix X:
//   TRANS = 0:  O[r] (+)= alpha * sum_{k <= r} P[r,k] X[k]   (forward out = att v; backward dq)
//   TRANS = 1:  O[r] (+)= alpha * sum_{k >= r} P[k,r] X[k]   (backward dk, dv)
// P (B,NH,T,T) is read only on and below the diagonal, so what lies above it does not matter.
// X rows are ldx floats apart starting at channel xoff + h*hs of batch b's first row (b*T*ldx);
// O likewise with ldo and ooff. ACCUMULATE = 1 adds to O instead of overwriting it.
//
// Workgroup (x: block of BR output rows, y: channel block + head * ncb, z: batch); each
// invocation owns RR rows (ly + i*LY) x RC channels (lx + j*LX) of the output. BK > 0 (GPUs):
// tiles of BK rows of P and X pass through shared memory. BK = 0 (CPU drivers such as lavapipe,
// where barriers are dear): P and X are read straight from memory, no barrier; with LY = 1 the
// loads of P are uniform across the workgroup. Sums run in a fixed order: deterministic.
layout(constant_id = 3) const uint RR = 4;         // output rows per invocation
layout(constant_id = 4) const uint RC = 4;         // channels per invocation
layout(constant_id = 5) const uint BK = 32;        // reduction tile in shared memory, 0 = none
layout(constant_id = 6) const uint TRANS = 0;      // 1: use P transposed
layout(constant_id = 7) const uint ACCUMULATE = 0; // 1: O += result

layout(push_constant) uniform Push {
    Floats P;
    Floats X;
    Floats O;
    uint T, NH, hs, ncb;
    uint ldx, xoff, ldo, ooff;
    float alpha;
} p;

const uint LX = gl_WorkGroupSize.x;
const uint LY = gl_WorkGroupSize.y;
const uint WG = LX * LY;
const uint BR = LY * RR;
const uint BC = LX * RC;
const uint BKS = BK > 0 ? BK : 1;
const uint PSTRIDE = BR + 1; // ps[k * PSTRIDE + r]: padded so the transposing stores spread

shared float ps[BKS * PSTRIDE];
shared float xs[BKS * BC];

float acc[RR][RC];

// P[row, k] as the product uses it (0 off the causal triangle); row < T and k < T
float p_at(uint pbase, uint row, uint k)
{
    if (TRANS == 1)
        return row <= k ? p.P.v[pbase + k * p.T + row] : 0.0;
    return k <= row ? p.P.v[pbase + row * p.T + k] : 0.0;
}

// acc += P[rows, kbeg..kend) X[kbeg..kend, channels], read straight from memory
void product_direct(uint pbase, uint xbase, uint r0, uint c0, uint kbeg, uint kend)
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    uint rows[RR], cols[RC];
    for (uint i = 0; i < RR; i++)
        rows[i] = min(r0 + ly + i * LY, p.T - 1); // clamped: in bounds, results not stored
    for (uint j = 0; j < RC; j++)
        cols[j] = min(c0 + lx + j * LX, p.hs - 1);
    for (uint k = kbeg; k < kend; k++) {
        float pv[RR], xv[RC];
        for (uint i = 0; i < RR; i++)
            pv[i] = p_at(pbase, rows[i], k);
        for (uint j = 0; j < RC; j++)
            xv[j] = p.X.v[xbase + k * p.ldx + cols[j]];
        for (uint i = 0; i < RR; i++)
            for (uint j = 0; j < RC; j++)
                acc[i][j] = fma(pv[i], xv[j], acc[i][j]);
    }
}

// the same through shared-memory tiles of BK rows (BKS = BK here)
void product_tiled(uint pbase, uint xbase, uint r0, uint c0, uint kbeg, uint kend)
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    const uint tid = gl_LocalInvocationIndex;
    for (uint k0 = kbeg; k0 < kend; k0 += BKS) {
        barrier(); // previous readers of ps and xs are done
        for (uint idx = tid; idx < BKS * BR; idx += WG) {
            // consecutive invocations read consecutive addresses of P
            uint r = TRANS == 1 ? idx % BR : idx / BKS;
            uint k = TRANS == 1 ? idx / BR : idx % BKS;
            uint row = r0 + r, kk = k0 + k;
            ps[k * PSTRIDE + r] = (row < p.T && kk < p.T) ? p_at(pbase, row, kk) : 0.0;
        }
        for (uint idx = tid; idx < BKS * BC; idx += WG) {
            uint k = idx / BC, c = idx % BC;
            uint kk = k0 + k;
            xs[idx] = (kk < p.T && c0 + c < p.hs) ? p.X.v[xbase + kk * p.ldx + c0 + c] : 0.0;
        }
        barrier();
        for (uint k = 0; k < BKS; k++) {
            float pv[RR], xv[RC];
            for (uint i = 0; i < RR; i++)
                pv[i] = ps[k * PSTRIDE + ly + i * LY];
            for (uint j = 0; j < RC; j++)
                xv[j] = xs[k * BC + lx + j * LX];
            for (uint i = 0; i < RR; i++)
                for (uint j = 0; j < RC; j++)
                    acc[i][j] = fma(pv[i], xv[j], acc[i][j]);
        }
    }
}

void main()
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    const uint T = p.T, b = gl_WorkGroupID.z;
    const uint h = gl_WorkGroupID.y / p.ncb, c0 = (gl_WorkGroupID.y % p.ncb) * BC;
    const uint r0 = gl_WorkGroupID.x * BR;
    const uint pbase = (b * p.NH + h) * T * T;
    const uint xbase = b * T * p.ldx + p.xoff + h * p.hs; // X of (b, row 0, head h)
    const uint obase = b * T * p.ldo + p.ooff + h * p.hs;
    // the reduction index k meets rows of this block only in [kbeg, kend)
    const uint kbeg = TRANS == 1 ? r0 : 0;
    const uint kend = TRANS == 1 ? T : min(T, r0 + BR);

    for (uint i = 0; i < RR; i++)
        for (uint j = 0; j < RC; j++)
            acc[i][j] = 0.0;
    if (BK == 0)
        product_direct(pbase, xbase, r0, c0, kbeg, kend);
    else
        product_tiled(pbase, xbase, r0, c0, kbeg, kend);

    for (uint i = 0; i < RR; i++) {
        uint row = r0 + ly + i * LY;
        if (row >= T)
            continue;
        for (uint j = 0; j < RC; j++) {
            uint c = c0 + lx + j * LX;
            if (c >= p.hs)
                continue;
            uint o = obase + row * p.ldo + c;
            float v = p.alpha * acc[i][j];
            if (ACCUMULATE == 1)
                v += p.O.v[o];
            p.O.v[o] = v;
        }
    }
}
