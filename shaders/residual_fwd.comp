#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// residual_fwd: out[i] = a[i] + b[i] (out may alias a or b).
// Mixed precision (common.glsl's bf16 storage), each operand read widened, the sum in fp32:
// OUT_BF16 = 1: out is bf16 (the residual stream stored bf16), the sum rounded to nearest even,
//   each invocation writing whole words (two elements; the high half of a last odd word is 0);
// A_BF16 = 1: a is bf16 (the residual stream); B_BF16 = 1: b is bf16 (a projection's output).
layout(constant_id = 3) const uint OUT_BF16 = 0;
layout(constant_id = 4) const uint A_BF16 = 0;
layout(constant_id = 5) const uint B_BF16 = 0;
layout(push_constant) uniform Push {
    Floats out_;
    Floats a;
    Floats b;
    uint n;
} p;

float sum_at(uint i)
{
    float a = A_BF16 == 1 ? bf16_load(Uints(uvec2(p.a)), i) : p.a.v[i];
    return a + (B_BF16 == 1 ? bf16_load(Uints(uvec2(p.b)), i) : p.b.v[i]);
}

void main()
{
    if (OUT_BF16 == 1) {
        for (uint w = gl_GlobalInvocationID.x; w < (p.n + 1) / 2; w += grid_stride_x()) {
            uint i = 2 * w;
            float hi = i + 1 < p.n ? sum_at(i + 1) : 0.0;
            Uints(uvec2(p.out_)).v[w] = bf16_pack2(sum_at(i), hi);
        }
        return;
    }
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += grid_stride_x())
        p.out_.v[i] = sum_at(i);
}
