#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// relu2_fwd: out[i] = max(inp[i], 0)^2 (squared ReLU, Primer).
// OUT_BF16 = 1 (mixed precision): out is bf16 (common.glsl), each invocation writing whole words
// (two elements), rounded to nearest even, the half after an odd n's last element 0.
layout(constant_id = 3) const uint OUT_BF16 = 0;
// IN_BF16 = 1: inp is bf16 (the pre-activation stored bf16), widened.
layout(constant_id = 4) const uint IN_BF16 = 0;
#define IN_AT(i) (IN_BF16 == 1 ? bf16_load(Uints(uvec2(p.inp)), i) : p.inp.v[i])

layout(push_constant) uniform Push {
    Floats out_;
    Floats inp;
    uint n;
} p;

float relu2(float x)
{
    float r = max(x, 0.0);
    return r * r;
}

void main()
{
    if (OUT_BF16 == 1) {
        for (uint w = gl_GlobalInvocationID.x; w < (p.n + 1) / 2; w += grid_stride_x()) {
            uint i = 2 * w;
            float hi = i + 1 < p.n ? relu2(IN_AT(i + 1)) : 0.0;
            Uints(uvec2(p.out_)).v[w] = bf16_pack2(relu2(IN_AT(i)), hi);
        }
        return;
    }
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x())
        p.out_.v[i] = relu2(IN_AT(i));
}
