#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// rmsnorm_bwd_dinp: per row n, with norm = x * rstd[n] and dnorm = weight * dout,
//   dinp[n, c] += (dnorm[c] - norm[c] * mean_c(dnorm * norm)) * rstd[n].
// One workgroup per row (grid-stride over rows); the row sum is reduced in one shared-memory
// tree (WG must be a power of two). The weight gradient is rmsnorm_bwd_dweight.
// INP_BF16 = 1 (mixed precision): inp is bf16 (the residual stream stored bf16), read widened.
layout(constant_id = 3) const uint INP_BF16 = 0;
#define INP(i) (INP_BF16 == 1 ? bf16_load(Uints(uvec2(p.inp)), i) : p.inp.v[i])
layout(push_constant) uniform Push {
    Floats dinp;   // (N, C), accumulated
    Floats dout;   // (N, C)
    Floats inp;    // (N, C)
    Floats weight; // (C)
    Floats rstd;   // (N)
    uint N, C;
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
    uint lid = gl_LocalInvocationID.x;
    for (uint row = gl_WorkGroupID.x; row < p.N; row += gl_NumWorkGroups.x) {
        uint base = row * p.C;
        float rs = p.rstd.v[row];
        float acc = 0.0; // sum dnorm * norm
        for (uint c = lid; c < p.C; c += WG)
            acc += p.weight.v[c] * p.dout.v[base + c] * (INP(base + c) * rs);
        float mu = wg_sum(acc) / float(p.C);
        for (uint c = lid; c < p.C; c += WG) {
            float norm = INP(base + c) * rs;
            float dnorm = p.weight.v[c] * p.dout.v[base + c];
            p.dinp.v[base + c] += (dnorm - norm * mu) * rs;
        }
    }
}
