#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// cast_bf16: out = bf16(in) for the n floats of in, rounded to nearest even (common.glsl). One
// invocation per pair of elements writes one whole word of out; with n odd the last word's high
// half is 0.
layout(push_constant) uniform Push {
    Uints out_;
    Floats in_;
    uint n;
} p;

void main()
{
    uint words = (p.n + 1) / 2;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += grid_stride_x()) {
        uint i = 2 * w;
        float hi = i + 1 < p.n ? p.in_.v[i + 1] : 0.0;
        p.out_.v[w] = bf16_pack2(p.in_.v[i], hi);
    }
}
