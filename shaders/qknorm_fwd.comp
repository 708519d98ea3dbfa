#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// qknorm_fwd: QK-norm, RMSNorm over each head's D values of q and k (no bias), on qkv (rows, W)
// with W = (NH + 2 NKV) D, per row [q (NH heads) | k (NKV) | v (NKV)]; out has qkv's layout:
//   q head h:  out = x * rstd * q_weight;   k head h:  out = x * rstd * k_weight   (weights (D),
//   shared by the heads), rstd = 1 / sqrt(mean(x^2) + eps) saved at rstd[row * (NH + NKV) + h];
//   v heads:   out = x (copied, so that out is the attention's whole input).
// One workgroup per head of a row (grid-stride over rows * (NH + 2 NKV) heads; the branch is the
// workgroup's, so the barriers are uniform), a fixed tree reduction (WG a power of two).
layout(push_constant) uniform Push {
    Floats out_;     // (rows, W)
    Floats rstd;     // (rows, NH + NKV)
    Floats qkv;      // (rows, W)
    Floats q_weight; // (D)
    Floats k_weight; // (D)
    uint rows, NH, NKV, D;
    float eps;
    uint pad_;
} p;

shared float s_red[gl_WorkGroupSize.x];

// Sum of v over the workgroup, in a fixed tree order; every invocation gets the result.
float wg_sum(float v)
{
    uint lid = gl_LocalInvocationID.x;
    s_red[lid] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (lid < s)
            s_red[lid] += s_red[lid + s];
        barrier();
    }
    float r = s_red[0];
    barrier(); // s_red is free again
    return r;
}

void main()
{
    const uint WG = gl_WorkGroupSize.x;
    uint lid = gl_LocalInvocationID.x, hk = p.NH + p.NKV, ha = hk + p.NKV;
    for (uint j = gl_WorkGroupID.x; j < p.rows * ha; j += gl_NumWorkGroups.x) {
        uint row = j / ha, h = j - row * ha, base = j * p.D; // W = ha * D
        if (h >= hk) {
            for (uint c = lid; c < p.D; c += WG)
                p.out_.v[base + c] = p.qkv.v[base + c];
            continue;
        }
        float q = 0.0;
        for (uint c = lid; c < p.D; c += WG) {
            float x = p.qkv.v[base + c];
            q += x * x;
        }
        float rs = 1.0 / sqrt(wg_sum(q) / float(p.D) + p.eps);
        Floats w = h < p.NH ? p.q_weight : p.k_weight;
        for (uint c = lid; c < p.D; c += WG)
            p.out_.v[base + c] = p.qkv.v[base + c] * rs * w.v[c];
        if (lid == 0)
            p.rstd.v[row * hk + h] = rs;
    }
}
