#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// rmsnorm_fwd: per row n of inp (N, C), RMSNorm (no mean subtracted, no bias):
//   rstd = 1 / sqrt(sum(x^2) / C + eps); out[n, c] = x[c] * rstd * weight[c]; rstd[n] saved.
// One workgroup per row (grid-stride over rows); each invocation strides over the channels and
// the workgroup reduces its partial sums of squares with a shared-memory tree (WG must be a
// power of two), the structure of layernorm_fwd.comp.
// RESIDUAL = 1 (a residual add followed by this RMSNorm, in one dispatch): the row is first
// formed as x = inp + addend, stored to res (the residual stream), and normalized: the same
// rounded sums as residual_fwd.comp. Each invocation reads back only the elements it stored.
layout(constant_id = 3) const uint RESIDUAL = 0;
// OUT_BF16 = 1 (mixed precision): out is bf16 (common.glsl), rounded to nearest even, each
// invocation storing pairs of channels as whole words (C must be even); sums stay fp32. With
// RESIDUAL = 1 a pair's x is formed again from inp + addend (the bits stored to res).
layout(constant_id = 4) const uint OUT_BF16 = 0;
// ADDEND_BF16 = 1 (with RESIDUAL = 1): addend is bf16, widened before the add.
layout(constant_id = 5) const uint ADDEND_BF16 = 0;
#define ADDEND(i) (ADDEND_BF16 == 1 ? bf16_load(Uints(uvec2(p.addend)), i) : p.addend.v[i])
// STREAM_BF16 = 1 (mixed precision): the residual stream is bf16: inp is read widened, and with
// RESIDUAL = 1 the sum inp + addend is rounded to bf16 once, stored to res as whole words (pairs
// of channels, C even) and normalized as rounded. Every invocation forms its elements from the
// inputs (it reads nothing back from res).
layout(constant_id = 6) const uint STREAM_BF16 = 0;
#define INP(i) (STREAM_BF16 == 1 ? bf16_load(Uints(uvec2(p.inp)), i) : p.inp.v[i])

layout(push_constant) uniform Push {
    Floats out_;   // (N, C)
    Floats rstd;   // (N)
    Floats inp;    // (N, C)
    Floats weight; // (C)
    uint N, C;
    float eps;
    uint pad_;
    Floats res;    // (N, C), RESIDUAL = 1: inp + addend
    Floats addend; // (N, C), RESIDUAL = 1
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

// Element i of the row normalized, formed from its inputs.
float x_at(uint i)
{
    if (RESIDUAL == 0)
        return INP(i);
    float v = INP(i) + ADDEND(i);
    return STREAM_BF16 == 1 ? bf16_widen(bf16_round(v)) : v;
}

// Element i of the row normalized, once the first pass has stored res.
float x_again(uint i)
{
    if (STREAM_BF16 == 1)
        return x_at(i);
    return RESIDUAL == 1 ? p.res.v[i] : p.inp.v[i];
}

void main()
{
    const uint WG = gl_WorkGroupSize.x;
    uint lid = gl_LocalInvocationID.x;
    for (uint row = gl_WorkGroupID.x; row < p.N; row += gl_NumWorkGroups.x) {
        uint base = row * p.C;
        float q = 0.0;
        for (uint c = lid; c < p.C; c += WG) {
            float v = x_at(base + c);
            if (RESIDUAL == 1 && STREAM_BF16 == 0)
                p.res.v[base + c] = v;
            q += v * v;
        }
        for (uint c = 2 * lid; RESIDUAL == 1 && STREAM_BF16 == 1 && c < p.C; c += 2 * WG)
            Uints(uvec2(p.res)).v[(base + c) / 2] = bf16_pack2(x_at(base + c), x_at(base + c + 1));
        float rs = 1.0 / sqrt(wg_sum(q) / float(p.C) + p.eps);
        for (uint c = 2 * lid; OUT_BF16 == 1 && c < p.C; c += 2 * WG)
            Uints(uvec2(p.out_)).v[(base + c) / 2] =
                bf16_pack2(x_at(base + c) * rs * p.weight.v[c],
                           x_at(base + c + 1) * rs * p.weight.v[c + 1]);
        for (uint c = lid; OUT_BF16 == 0 && c < p.C; c += WG)
            p.out_.v[base + c] = x_again(base + c) * rs * p.weight.v[c];
        if (lid == 0)
            p.rstd.v[row] = rs;
    }
}
