#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// attention_bwd: gradient of the pre-softmax scores of one head, the first backward pass:
//   datt[t,t2] = dout[b,t,h] . v[b,t2,h]
//   dpre[t,t2] = att[t,t2] * (datt[t,t2] - sum_{j <= t} att[t,j] datt[t,j])     for t2 <= t
// dout (B,T,C), qkv (B,T,3C), att (B,NH,T,T) in; dpre (B,NH,T,T) out, written only on and below
// the diagonal. attention_fwd_pv then turns dpre into dq (and, transposed, dk), and att into dv.
//
// Same tiling as attention_fwd, with dout in the place of q and v in the place of k: workgroup
// (x: block of BQ query rows, y: head, z: batch); each invocation owns RQ rows (ly + i*LY) x RK
// keys (lx + j*LX) of every tile of BK keys. It stores datt in dpre and sums att * datt per row;
// the LX partial sums of a row are added in a fixed order through shared memory, then each
// invocation rewrites the entries it wrote itself as dpre. HC > 0: dout and v go through shared
// memory HC channels at a time; HC = 0 (CPU drivers): read straight from memory, no barrier but
// the one of the row sums.
layout(constant_id = 3) const uint RQ = 4;  // query rows per invocation
layout(constant_id = 4) const uint RK = 4;  // keys per invocation and tile
layout(constant_id = 5) const uint HC = 64; // channels per shared-memory chunk, 0 = none

layout(push_constant) uniform Push {
    Floats dpre; // (B,NH,T,T) out
    Floats dout; // (B,T,C) in
    Floats qkv;  // (B,T,3C) in
    Floats att;  // (B,NH,T,T) in
    uint T, C, NH, hs;
} p;

const uint LX = gl_WorkGroupSize.x;
const uint LY = gl_WorkGroupSize.y;
const uint WG = LX * LY;
const uint BQ = LY * RQ;
const uint BK = LX * RK;
const uint HCS = HC > 0 ? HC : 1;
const uint VSTRIDE = BK + 1; // vs[c * VSTRIDE + key]: padded so the transposing stores spread

shared float ds[BQ * HCS];
shared float vs[HCS * VSTRIDE];
shared float red_s[BQ * LX];

float acc[RQ][RK];

// acc = dout[rows] . v[keys of the tile at k0], read straight from memory
void dots_direct(uint drow, uint vrow, uint q0, uint k0)
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    uint dofs[RQ], vofs[RK];
    for (uint i = 0; i < RQ; i++) // clamped: in bounds, results not used
        dofs[i] = drow + min(q0 + ly + i * LY, p.T - 1) * p.C;
    for (uint j = 0; j < RK; j++)
        vofs[j] = vrow + min(k0 + lx + j * LX, p.T - 1) * 3 * p.C;
    for (uint c = 0; c < p.hs; c++) {
        float dv[RQ], vv[RK];
        for (uint i = 0; i < RQ; i++)
            dv[i] = p.dout.v[dofs[i] + c];
        for (uint j = 0; j < RK; j++)
            vv[j] = p.qkv.v[vofs[j] + c];
        for (uint i = 0; i < RQ; i++)
            for (uint j = 0; j < RK; j++)
                acc[i][j] = fma(dv[i], vv[j], acc[i][j]);
    }
}

// the block's dout rows, channels c0..c0+HC, into ds (HCS = HC here)
void load_dout(uint drow, uint q0, uint c0)
{
    for (uint idx = gl_LocalInvocationIndex; idx < BQ * HCS; idx += WG) {
        uint r = idx / HCS, c = idx % HCS;
        uint t = q0 + r, ch = c0 + c;
        ds[idx] = (t < p.T && ch < p.hs) ? p.dout.v[drow + t * p.C + ch] : 0.0;
    }
}

// the same through shared memory, HC channels at a time; dout is already there when d_resident
void dots_tiled(uint drow, uint vrow, uint q0, uint k0, bool d_resident)
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    for (uint c0 = 0; c0 < p.hs; c0 += HCS) {
        barrier(); // previous readers of vs (and ds) are done
        if (!d_resident)
            load_dout(drow, q0, c0);
        for (uint idx = gl_LocalInvocationIndex; idx < BK * HCS; idx += WG) {
            uint r = idx / HCS, c = idx % HCS;
            uint t = k0 + r, ch = c0 + c;
            vs[c * VSTRIDE + r] = (t < p.T && ch < p.hs) ? p.qkv.v[vrow + t * 3 * p.C + ch] : 0.0;
        }
        barrier();
        for (uint c = 0; c < HCS; c++) {
            float dv[RQ], vv[RK];
            for (uint i = 0; i < RQ; i++)
                dv[i] = ds[(ly + i * LY) * HCS + c];
            for (uint j = 0; j < RK; j++)
                vv[j] = vs[c * VSTRIDE + lx + j * LX];
            for (uint i = 0; i < RQ; i++)
                for (uint j = 0; j < RK; j++)
                    acc[i][j] = fma(dv[i], vv[j], acc[i][j]);
        }
    }
}

void main()
{
    const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    const uint T = p.T, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
    const uint q0 = gl_WorkGroupID.x * BQ;
    const uint drow = b * T * p.C + h * p.hs;               // dout of (b, t=0, head h)
    const uint vrow = b * T * 3 * p.C + 2 * p.C + h * p.hs; // v of (b, t=0, head h)
    const uint arow = (b * p.NH + h) * T;                    // att row of (b, h, t=0)
    const uint kend = min(T, q0 + BQ);
    const bool d_resident = HC > 0 && p.hs <= HC;

    float s[RQ];
    for (uint i = 0; i < RQ; i++)
        s[i] = 0.0;
    if (d_resident)
        load_dout(drow, q0, 0);

    for (uint k0 = 0; k0 < kend; k0 += BK) {
        for (uint i = 0; i < RQ; i++)
            for (uint j = 0; j < RK; j++)
                acc[i][j] = 0.0;
        if (HC == 0)
            dots_direct(drow, vrow, q0, k0);
        else
            dots_tiled(drow, vrow, q0, k0, d_resident);
        for (uint i = 0; i < RQ; i++) {
            uint t = q0 + ly + i * LY;
            if (t >= T)
                continue;
            for (uint j = 0; j < RK; j++) {
                uint t2 = k0 + lx + j * LX;
                if (t2 <= t) {
                    uint o = (arow + t) * T + t2;
                    s[i] = fma(p.att.v[o], acc[i][j], s[i]);
                    p.dpre.v[o] = acc[i][j];
                }
            }
        }
    }

    for (uint i = 0; i < RQ; i++)
        red_s[(ly + i * LY) * LX + lx] = s[i];
    barrier();
    for (uint i = 0; i < RQ; i++) {
        uint r = ly + i * LY;
        float sum = 0.0;
        for (uint x = 0; x < LX; x++)
            sum += red_s[r * LX + x];
        s[i] = sum;
    }

    for (uint i = 0; i < RQ; i++) {
        uint t = q0 + ly + i * LY;
        if (t >= T)
            continue;
        for (uint t2 = lx; t2 <= t; t2 += LX) {
            uint o = (arow + t) * T + t2;
            p.dpre.v[o] = p.att.v[o] * (p.dpre.v[o] - s[i]);
        }
    }
}
