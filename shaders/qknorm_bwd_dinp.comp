#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// qknorm_bwd_dinp: the input gradient of qknorm_fwd.comp, accumulated into dqkv (qkv's layout):
//   q and k heads, with norm = x * rstd and dnorm = weight * dout (the head's weight):
//     dqkv += (dnorm - norm * mean_c(dnorm * norm)) * rstd;
//   v heads: dqkv += dout (the forward copied them).
// One workgroup per head of a row, as the forward; the weight gradients are
// qknorm_bwd_dweight.comp.
layout(push_constant) uniform Push {
    Floats dqkv;     // (rows, W), accumulated
    Floats dout;     // (rows, W)
    Floats qkv;      // (rows, W)
    Floats q_weight; // (D)
    Floats k_weight; // (D)
    Floats rstd;     // (rows, NH + NKV)
    uint rows, NH, NKV, D;
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
        uint row = j / ha, h = j - row * ha, base = j * p.D;
        if (h >= hk) {
            for (uint c = lid; c < p.D; c += WG)
                p.dqkv.v[base + c] += p.dout.v[base + c];
            continue;
        }
        float rs = p.rstd.v[row * hk + h];
        Floats w = h < p.NH ? p.q_weight : p.k_weight;
        float acc = 0.0; // sum dnorm * norm
        for (uint c = lid; c < p.D; c += WG)
            acc += w.v[c] * p.dout.v[base + c] * (p.qkv.v[base + c] * rs);
        float mu = wg_sum(acc) / float(p.D);
        for (uint c = lid; c < p.D; c += WG) {
            float norm = p.qkv.v[base + c] * rs, dnorm = w.v[c] * p.dout.v[base + c];
            p.dqkv.v[base + c] += (dnorm - norm * mu) * rs;
        }
    }
}
