#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// layernorm_bwd_dinp: per row n, with norm = (x - mean[n]) * rstd[n] and dnorm = weight * dout,
//   dinp[n, c] += (dnorm[c] - mean_c(dnorm) - norm[c] * mean_c(dnorm * norm)) * rstd[n].
// One workgroup per row (grid-stride over rows); both row sums are reduced together in one
// shared-memory tree (WG must be a power of two). The parameter gradients are
// layernorm_bwd_dparams.
// INP_BF16 = 1 (mixed precision): inp is bf16 (the residual stream stored bf16), read widened.
layout(constant_id = 3) const uint INP_BF16 = 0;
#define INP(i) (INP_BF16 == 1 ? bf16_load(Uints(uvec2(p.inp)), i) : p.inp.v[i])
layout(push_constant) uniform Push {
    Floats dinp;   // (N, C), accumulated
    Floats dout;   // (N, C)
    Floats inp;    // (N, C)
    Floats weight; // (C)
    Floats mean;   // (N)
    Floats rstd;   // (N)
    uint N, C;
} p;

shared vec2 s_red[gl_WorkGroupSize.x];

// Sum of v over the workgroup, in a fixed tree order; every invocation gets the result.
vec2 wg_sum(vec2 v)
{
    uint lid = gl_LocalInvocationID.x;
    s_red[lid] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (lid < s)
            s_red[lid] += s_red[lid + s];
        barrier();
    }
    vec2 r = s_red[0];
    barrier(); // s_red is free again
    return r;
}

void main()
{
    const uint WG = gl_WorkGroupSize.x;
    uint lid = gl_LocalInvocationID.x;
    for (uint row = gl_WorkGroupID.x; row < p.N; row += gl_NumWorkGroups.x) {
        uint base = row * p.C;
        float m = p.mean.v[row], rs = p.rstd.v[row];
        vec2 acc = vec2(0.0); // (sum dnorm, sum dnorm * norm)
        for (uint c = lid; c < p.C; c += WG) {
            float dnorm = p.weight.v[c] * p.dout.v[base + c];
            acc += vec2(dnorm, dnorm * ((INP(base + c) - m) * rs));
        }
        vec2 mu = wg_sum(acc) / float(p.C);
        for (uint c = lid; c < p.C; c += WG) {
            float norm = (INP(base + c) - m) * rs;
            float dnorm = p.weight.v[c] * p.dout.v[base + c];
            p.dinp.v[base + c] += (dnorm - mu.x - norm * mu.y) * rs;
        }
    }
}
