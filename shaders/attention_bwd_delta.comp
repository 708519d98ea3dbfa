#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// attention_bwd_delta: the first pass of the flash backward, one value per (batch, head, row):
//   delta[b,h,t] = dout[b,t,h] . out[b,t,h]   (= sum_t2 att[t,t2] datt[t,t2], the softmax term)
// dout, out (B,T,C) in, head h at channels h*hs..(h+1)*hs; delta (B,NH,T) out.
// Invocation i of batch gl_WorkGroupID.y takes row t = i / NH, head h = i % NH and sums its hs
// products in channel order: deterministic.
// OUT_BF16 = 1 (mixed precision): out is bf16 (common.glsl), widened; the sum stays fp32.
layout(constant_id = 3) const uint OUT_BF16 = 0;

layout(push_constant) uniform Push {
    Floats delta; // (B,NH,T) out
    Floats dout;  // (B,T,C) in
    Floats out_;  // (B,T,C) in
    uint T, C, NH, hs;
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x, b = gl_WorkGroupID.y;
    if (i >= p.T * p.NH)
        return;
    const uint t = i / p.NH, h = i % p.NH;
    const uint row = (b * p.T + t) * p.C + h * p.hs;
    float d = 0.0;
    for (uint c = 0; c < p.hs; c++)
        d = fma(p.dout.v[row + c],
                OUT_BF16 == 1 ? bf16_load(Uints(uvec2(p.out_)), row + c) : p.out_.v[row + c], d);
    p.delta.v[(b * p.NH + h) * p.T + t] = d;
}
