#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// layernorm_fwd: per row n of inp (N, C):
//   mean = sum(x) / C; var = sum((x - mean)^2) / C (biased); rstd = 1 / sqrt(var + 1e-5)
//   out[n, c] = (x[c] - mean) * rstd * weight[c] + bias[c]; mean[n], rstd[n] saved for backward.
// One workgroup per row (grid-stride over rows); each invocation strides over the channels and
// the workgroup reduces its partial sums with a shared-memory tree (WG must be a power of two),
// mean first, then the centred squares, as the reference does.
// OUT_BF16 = 1 (mixed precision): out is bf16 (common.glsl), rounded to nearest even, each
// invocation storing pairs of channels as whole words (C must be even); sums stay fp32.
layout(constant_id = 3) const uint OUT_BF16 = 0;

layout(push_constant) uniform Push {
    Floats out_;   // (N, C)
    Floats mean;   // (N)
    Floats rstd;   // (N)
    Floats inp;    // (N, C)
    Floats weight; // (C)
    Floats bias;   // (C)
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
        float s = 0.0;
        for (uint c = lid; c < p.C; c += WG)
            s += p.inp.v[base + c];
        float m = wg_sum(s) / float(p.C);
        float q = 0.0;
        for (uint c = lid; c < p.C; c += WG) {
            float d = p.inp.v[base + c] - m;
            q += d * d;
        }
        float rs = 1.0 / sqrt(wg_sum(q) / float(p.C) + 1e-5);
        for (uint c = 2 * lid; OUT_BF16 == 1 && c < p.C; c += 2 * WG)
            Uints(uvec2(p.out_)).v[(base + c) / 2] =
                bf16_pack2((p.inp.v[base + c] - m) * rs * p.weight.v[c] + p.bias.v[c],
                           (p.inp.v[base + c + 1] - m) * rs * p.weight.v[c + 1] + p.bias.v[c + 1]);
        for (uint c = lid; OUT_BF16 == 0 && c < p.C; c += WG)
            p.out_.v[base + c] = (p.inp.v[base + c] - m) * rs * p.weight.v[c] + p.bias.v[c];
        if (lid == 0) {
            p.mean.v[row] = m;
            p.rstd.v[row] = rs;
        }
    }
}
